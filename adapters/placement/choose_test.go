package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// mc is a reachable, schedulable management cluster with room for max clusters, n of them placed.
func mc(name string, n, maxClusters int, edit ...func(*Candidate)) Candidate {
	c := Candidate{Name: name, Region: "us-east-1", Labels: map[string]string{"tier": "gold"}, Reachable: true,
		Capacity: Capacity{MaxHostedClusters: maxClusters}, Placed: n}
	for _, e := range edit {
		e(&c)
	}
	return c
}

var cp = ControlPlane{VCPU: 5, MemoryGiB: 18}

func TestChoose(t *testing.T) {
	tests := []struct {
		name        string
		candidates  []Candidate
		want        Want
		wantName    string
		wantReasons []string
	}{
		{
			name:        "none registered",
			want:        Want{ControlPlane: cp},
			wantReasons: nil,
		},
		{
			name:       "least used by share, not by count",
			candidates: []Candidate{mc("mc-a", 2, 10), mc("mc-b", 3, 30), mc("mc-c", 1, 2)},
			want:       Want{ControlPlane: cp},
			wantName:   "mc-b", // 0.1 beats 0.2 and 0.5
		},
		{
			name:       "ties go to the first name",
			candidates: []Candidate{mc("mc-c", 1, 3), mc("mc-b", 2, 6), mc("mc-a", 4, 6)},
			want:       Want{ControlPlane: cp},
			wantName:   "mc-b", // 1/3 and 2/6 are the same share
		},
		{
			name:       "empty ones first, by name",
			candidates: []Candidate{mc("mc-b", 0, 1), mc("mc-a", 0, 5)},
			want:       Want{ControlPlane: cp},
			wantName:   "mc-a",
		},
		{
			name:        "full",
			candidates:  []Candidate{mc("mc-a", 2, 2), mc("mc-b", 1, 4)},
			want:        Want{ControlPlane: cp},
			wantName:    "mc-b",
			wantReasons: []string{"mc-a: full (2/2 hosted clusters)"},
		},
		{
			name: "vCPU budget",
			candidates: []Candidate{
				mc("mc-a", 2, 10, func(c *Candidate) { c.Capacity.VCPU = 14 }), // a third needs 15
				mc("mc-b", 5, 10),
			},
			want:        Want{ControlPlane: cp},
			wantName:    "mc-b",
			wantReasons: []string{"mc-a: full (10/14 vCPU)"},
		},
		{
			name: "memory budget",
			candidates: []Candidate{
				mc("mc-a", 1, 10, func(c *Candidate) { c.Capacity.MemoryGiB = 36 }), // exactly room for a second
				mc("mc-b", 1, 10, func(c *Candidate) { c.Capacity.MemoryGiB = 35 }),
			},
			want:        Want{ControlPlane: cp},
			wantName:    "mc-a",
			wantReasons: []string{"mc-b: full (18/35 GiB memory)"},
		},
		{
			name: "the fullest budget is the share",
			candidates: []Candidate{
				mc("mc-a", 1, 10, func(c *Candidate) { c.Capacity.VCPU = 10 }), // 0.5 by vCPU, 0.1 by count
				mc("mc-b", 3, 10), // 0.3
			},
			want:     Want{ControlPlane: cp},
			wantName: "mc-b",
		},
		{
			name: "cordoned, deleting, unreachable and unreadable are skipped",
			candidates: []Candidate{
				mc("mc-a", 0, 5, func(c *Candidate) { c.Cordoned = true }),
				mc("mc-b", 0, 5, func(c *Candidate) { c.Deleting = true }),
				mc("mc-c", 0, 5, func(c *Candidate) { c.Reachable, c.Unreachable = false, "CredentialsNotFound" }),
				mc("mc-d", 0, 5, func(c *Candidate) { c.Reachable = false }),
				mc("mc-e", 0, 5, func(c *Candidate) { c.Invalid = "bad JSON" }),
				mc("mc-f", 4, 5),
			},
			want:     Want{ControlPlane: cp},
			wantName: "mc-f",
			wantReasons: []string{"mc-a: cordoned", "mc-b: being deleted", "mc-c: not reachable (CredentialsNotFound)",
				"mc-d: not reachable (unknown)", "mc-e: unreadable spec (bad JSON)"},
		},
		{
			name: "deleting wins over cordoned in the reason",
			candidates: []Candidate{
				mc("mc-a", 0, 5, func(c *Candidate) { c.Cordoned, c.Deleting = true, true }),
			},
			want:        Want{ControlPlane: cp},
			wantReasons: []string{"mc-a: being deleted"},
		},
		{
			name: "region",
			candidates: []Candidate{
				mc("mc-a", 0, 5, func(c *Candidate) { c.Region = "eu-west-1" }),
				mc("mc-b", 0, 5, func(c *Candidate) { c.Region = "" }),
				mc("mc-c", 4, 5),
			},
			want:        Want{Region: "us-east-1", ControlPlane: cp},
			wantName:    "mc-c",
			wantReasons: []string{"mc-a: in region eu-west-1, not us-east-1", "mc-b: in no region, not us-east-1"},
		},
		{
			name: "no region asked: any region",
			candidates: []Candidate{
				mc("mc-a", 0, 5, func(c *Candidate) { c.Region = "eu-west-1" }),
				mc("mc-b", 1, 5),
			},
			want:     Want{ControlPlane: cp},
			wantName: "mc-a",
		},
		{
			name: "selector: every label must match",
			candidates: []Candidate{
				mc("mc-a", 0, 5, func(c *Candidate) { c.Labels = map[string]string{"tier": "silver", "zone": "a"} }),
				mc("mc-b", 0, 5, func(c *Candidate) { c.Labels = map[string]string{"tier": "gold"} }),
				mc("mc-c", 3, 5, func(c *Candidate) { c.Labels = map[string]string{"tier": "gold", "zone": "a"} }),
				mc("mc-d", 0, 5, func(c *Candidate) { c.Labels = nil }),
			},
			want:        Want{Selector: map[string]string{"tier": "gold", "zone": "a"}, ControlPlane: cp},
			wantName:    "mc-c",
			wantReasons: []string{"mc-a: labels do not match", "mc-b: labels do not match", "mc-d: labels do not match"},
		},
		{
			name: "nothing fits: every reason, in name order",
			candidates: []Candidate{
				mc("mc-e", 0, 5, func(c *Candidate) { c.Labels = nil }),
				mc("mc-a", 2, 2),
				mc("mc-d", 0, 5, func(c *Candidate) { c.Reachable, c.Unreachable = false, "Unreachable" }),
				mc("mc-c", 0, 5, func(c *Candidate) { c.Region = "eu-west-1" }),
				mc("mc-b", 0, 5, func(c *Candidate) { c.Cordoned = true }),
			},
			want: Want{Region: "us-east-1", Selector: map[string]string{"tier": "gold"}, ControlPlane: cp},
			wantReasons: []string{"mc-a: full (2/2 hosted clusters)", "mc-b: cordoned", "mc-c: in region eu-west-1, not us-east-1",
				"mc-d: not reachable (Unreachable)", "mc-e: labels do not match"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotName, gotReasons := Choose(tt.candidates, tt.want)
			require.Equal(t, tt.wantName, gotName)
			require.Equal(t, tt.wantReasons, gotReasons)
		})
	}
}

// Placing one cluster after another, each on Choose's pick, fills management clusters in proportion to their
// capacity, and never past it.
func TestChooseSpreadsByCapacity(t *testing.T) {
	tests := []struct {
		name   string
		caps   map[string]int
		place  int
		placed map[string]int
		left   int // clusters nothing took
	}{
		{name: "1/2/3 of 6", caps: map[string]int{"mc-1": 1, "mc-2": 2, "mc-3": 3}, place: 6,
			placed: map[string]int{"mc-1": 1, "mc-2": 2, "mc-3": 3}},
		{name: "half of each", caps: map[string]int{"mc-1": 10, "mc-2": 20, "mc-3": 30}, place: 30,
			placed: map[string]int{"mc-1": 5, "mc-2": 10, "mc-3": 15}},
		{name: "no overshoot", caps: map[string]int{"mc-1": 3, "mc-2": 4}, place: 10,
			placed: map[string]int{"mc-1": 3, "mc-2": 4}, left: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			placed := map[string]int{}
			left := 0
			for range tt.place {
				var cands []Candidate
				for name, n := range tt.caps {
					cands = append(cands, mc(name, placed[name], n))
				}
				name, _ := Choose(cands, Want{ControlPlane: cp})
				if name == "" {
					left++
					continue
				}
				placed[name]++
			}
			require.Equal(t, tt.placed, placed)
			require.Equal(t, tt.left, left)
		})
	}
}
