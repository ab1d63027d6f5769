package resource

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// testNow is the fixed clock of these tests: nothing here reads the wall clock.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestMergeConditions(t *testing.T) {
	earlier := testNow.Add(-time.Hour)
	tests := []struct {
		name       string
		reported   []conditions.Reported
		stored     []conditions.Condition
		generation int64
		want       []conditions.Condition
	}{
		{
			name:       "first report: every condition transitions now",
			reported:   []conditions.Reported{{Type: "Available", Status: conditions.True, Reason: "Ok", Message: "fine"}, {Type: "Applied", Status: conditions.False}},
			generation: 2,
			want: []conditions.Condition{
				{Type: "Available", Status: conditions.True, Reason: "Ok", Message: "fine", ObservedGeneration: 2, LastTransitionTime: testNow, LastUpdatedTime: testNow},
				{Type: "Applied", Status: conditions.False, ObservedGeneration: 2, LastTransitionTime: testNow, LastUpdatedTime: testNow},
			},
		},
		{
			name:     "same type and status keeps the transition time, takes the new reason and generation",
			reported: []conditions.Reported{{Type: "Available", Status: conditions.True, Reason: "StillOk", Message: "new"}},
			stored: []conditions.Condition{{Type: "Available", Status: conditions.True, Reason: "Ok", Message: "old", ObservedGeneration: 1,
				LastTransitionTime: earlier, LastUpdatedTime: earlier}},
			generation: 3,
			want: []conditions.Condition{{Type: "Available", Status: conditions.True, Reason: "StillOk", Message: "new", ObservedGeneration: 3,
				LastTransitionTime: earlier, LastUpdatedTime: testNow}},
		},
		{
			name:       "a status flip moves the transition time",
			reported:   []conditions.Reported{{Type: "Available", Status: conditions.False}},
			stored:     []conditions.Condition{{Type: "Available", Status: conditions.True, ObservedGeneration: 1, LastTransitionTime: earlier, LastUpdatedTime: earlier}},
			generation: 1,
			want:       []conditions.Condition{{Type: "Available", Status: conditions.False, ObservedGeneration: 1, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:       "Unknown to True is a flip too",
			reported:   []conditions.Reported{{Type: "Available", Status: conditions.True}},
			stored:     []conditions.Condition{{Type: "Available", Status: conditions.Unknown, LastTransitionTime: earlier, LastUpdatedTime: earlier}},
			generation: 1,
			want:       []conditions.Condition{{Type: "Available", Status: conditions.True, ObservedGeneration: 1, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:       "a stored condition without a transition time gets now",
			reported:   []conditions.Reported{{Type: "Available", Status: conditions.True}},
			stored:     []conditions.Condition{{Type: "Available", Status: conditions.True}},
			generation: 1,
			want:       []conditions.Condition{{Type: "Available", Status: conditions.True, ObservedGeneration: 1, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:     "new types get now, matched types keep theirs, dropped types vanish",
			reported: []conditions.Reported{{Type: "Available", Status: conditions.True}, {Type: "Finalized", Status: conditions.False}},
			stored: []conditions.Condition{
				{Type: "Applied", Status: conditions.True, LastTransitionTime: earlier.Add(-time.Hour)},
				{Type: "Available", Status: conditions.True, LastTransitionTime: earlier},
			},
			generation: 5,
			want: []conditions.Condition{
				{Type: "Available", Status: conditions.True, ObservedGeneration: 5, LastTransitionTime: earlier, LastUpdatedTime: testNow},
				{Type: "Finalized", Status: conditions.False, ObservedGeneration: 5, LastTransitionTime: testNow, LastUpdatedTime: testNow},
			},
		},
		{
			name:     "the same status under another type does not count",
			reported: []conditions.Reported{{Type: "Available", Status: conditions.True}},
			stored:   []conditions.Condition{{Type: "Applied", Status: conditions.True, LastTransitionTime: earlier}},
			want:     []conditions.Condition{{Type: "Available", Status: conditions.True, LastTransitionTime: testNow, LastUpdatedTime: testNow}},
		},
		{
			name:   "no conditions reported",
			stored: []conditions.Condition{{Type: "Available", Status: conditions.True, LastTransitionTime: earlier}},
			want:   []conditions.Condition{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mergeConditions(tt.reported, tt.stored, tt.generation, testNow)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCheckFresh(t *testing.T) {
	storedTime := testNow.Add(-10 * time.Minute)
	stored := &AdapterStatus{Adapter: "version-resolver", ObservedGeneration: 3, ObservedTime: storedTime}
	tests := []struct {
		name       string
		generation int64
		observed   time.Time
		wantStale  bool
	}{
		{name: "older generation, later time", generation: 2, observed: storedTime.Add(time.Hour), wantStale: true},
		{name: "older generation, same time", generation: 2, observed: storedTime, wantStale: true},
		// The adapter's clock does not order reports of one generation: the server's order of arrival does.
		{name: "same generation, earlier time", generation: 3, observed: storedTime.Add(-time.Nanosecond)},
		{name: "same generation, an hour earlier", generation: 3, observed: storedTime.Add(-time.Hour)},
		{name: "same generation, same time (a retry)", generation: 3, observed: storedTime},
		{name: "same generation, same instant in another zone", generation: 3, observed: storedTime.In(time.FixedZone("UTC-5", -5*3600))},
		{name: "same generation, later time", generation: 3, observed: storedTime.Add(time.Second)},
		{name: "newer generation, earlier time", generation: 4, observed: storedTime.Add(-time.Hour)},
		{name: "newer generation, later time", generation: 4, observed: storedTime.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := conditions.Report{Adapter: "version-resolver", ObservedGeneration: tt.generation, ObservedTime: tt.observed,
				Conditions: []conditions.Reported{{Type: conditions.Available, Status: conditions.True}}}
			err := checkFresh(&rep, stored)
			if !tt.wantStale {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, CodeStatusStale, ErrorCode(err))
			require.Equal(t, CodeStatusStale, ErrorCode(fmt.Errorf("put status: %w", err)), "the code survives wrapping")
		})
	}
}

func TestSameStatus(t *testing.T) {
	later := testNow.Add(time.Minute)
	base := Status{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{
		{Type: "Ready", Status: conditions.True, Reason: "AllAdaptersReady", ObservedGeneration: 2, LastTransitionTime: testNow, LastUpdatedTime: testNow},
	}}
	with := func(change func(c *conditions.Condition, s *Status)) Status {
		out := Status{Phase: base.Phase, Conditions: append([]conditions.Condition(nil), base.Conditions...)}
		change(&out.Conditions[0], &out)
		return out
	}
	tests := []struct {
		name  string
		other Status
		want  bool
	}{
		{"identical", with(func(*conditions.Condition, *Status) {}), true},
		{"only recomputed later", with(func(c *conditions.Condition, _ *Status) { c.LastUpdatedTime = later }), true},
		{"phase", with(func(_ *conditions.Condition, s *Status) { s.Phase = conditions.PhaseDegraded }), false},
		{"status", with(func(c *conditions.Condition, _ *Status) { c.Status = conditions.False }), false},
		{"reason", with(func(c *conditions.Condition, _ *Status) { c.Reason = "Other" }), false},
		{"message", with(func(c *conditions.Condition, _ *Status) { c.Message = "m" }), false},
		{"generation", with(func(c *conditions.Condition, _ *Status) { c.ObservedGeneration = 3 }), false},
		{"transition", with(func(c *conditions.Condition, _ *Status) { c.LastTransitionTime = later }), false},
		{"more conditions", Status{Phase: conditions.PhaseReady, Conditions: append(append([]conditions.Condition(nil), base.Conditions...), conditions.Condition{Type: "X"})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, sameStatus(base, tt.other))
		})
	}
}
