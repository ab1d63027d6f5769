package hivelocity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

var (
	epoch   = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	poolA   = "01a22db5-9920-7428-86ba-843774991d4e"
	cluster = "01a22db5-991c-7562-9422-cb13a5c099c6"
)

func TestOwnershipTags(t *testing.T) {
	full := Ownership{Cluster: cluster, NodePool: poolA, Slot: 3, Claim: Claim{At: epoch, Nonce: "a1b2"}, Spec: "0123456789ab",
		ReloadAt: epoch.Add(time.Second), ReleaseAt: epoch.Add(2 * time.Second)}
	tests := []struct {
		name string
		own  Ownership
		want []string
	}{
		{
			name: "claimed",
			own:  Ownership{Cluster: cluster, NodePool: poolA, Slot: 0, Claim: Claim{At: epoch, Nonce: "a1b2"}},
			want: []string{"hyperfleet-cluster=" + cluster, "hyperfleet-nodepool=" + poolA, "hyperfleet-slot=0", "hyperfleet-claim=1772618400000-a1b2"},
		},
		{
			name: "everything",
			own:  full,
			want: []string{"hyperfleet-cluster=" + cluster, "hyperfleet-nodepool=" + poolA, "hyperfleet-slot=3", "hyperfleet-claim=1772618400000-a1b2",
				"hyperfleet-spec=0123456789ab", "hyperfleet-reload=1772618401", "hyperfleet-release=1772618402"},
		},
		{
			name: "being released: no slot, no claim",
			own:  Ownership{Cluster: cluster, NodePool: poolA, Slot: -1, ReloadAt: epoch, ReleaseAt: epoch},
			want: []string{"hyperfleet-cluster=" + cluster, "hyperfleet-nodepool=" + poolA, "hyperfleet-reload=1772618400", "hyperfleet-release=1772618400"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.own.tags()
			require.Equal(t, tt.want, got)
			back, owned := ownershipOf(append([]string{"caphv-use=allow"}, got...))
			require.True(t, owned)
			require.Equal(t, tt.own, back, "tags read back")
		})
	}
}

func TestOwnershipOfForeignTags(t *testing.T) {
	tests := []struct {
		name      string
		tags      []string
		want      Ownership
		wantOwned bool
	}{
		{name: "none", tags: []string{"caphv-use=allow", "caphvlabel:deviceType=s1"}, want: Ownership{Slot: -1}},
		{name: "malformed slot and claim", tags: []string{"hyperfleet-slot=x", "hyperfleet-claim=nonce", "hyperfleet-reload=soon"},
			want: Ownership{Slot: -1}, wantOwned: true},
		{name: "an unknown tag of ours still owns", tags: []string{"hyperfleet-future=1"}, want: Ownership{Slot: -1}, wantOwned: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, owned := ownershipOf(tt.tags)
			require.Equal(t, tt.wantOwned, owned)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestTagLists(t *testing.T) {
	device := []string{"caphv-use=allow", "hyperfleet-nodepool=" + poolA, "caphvlabel:deviceType=s1", "hyperfleet-slot=1", "team=blue"}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{name: "a release keeps the operator's tags in order", got: operatorTags(device),
			want: []string{"caphv-use=allow", "caphvlabel:deviceType=s1", "team=blue"}},
		{name: "a write sends the operator's tags and ours", got: withOwnership(device, Ownership{Cluster: cluster, NodePool: poolA, Slot: 2}),
			want: []string{"caphv-use=allow", "caphvlabel:deviceType=s1", "team=blue", "hyperfleet-cluster=" + cluster, "hyperfleet-nodepool=" + poolA, "hyperfleet-slot=2"}},
		{name: "a permanent error replaces an earlier one and drops ours",
			got:  permanentError(append(device, "caphv-permanent-error=old"), "reloading-since-2026-03-04T10:00:00Z"),
			want: []string{"caphv-use=allow", "caphvlabel:deviceType=s1", "team=blue", "caphv-permanent-error=reloading-since-2026-03-04T10:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got)
		})
	}
}

func TestEligibility(t *testing.T) {
	req := Requirements{DeviceType: "s1.small", Region: "LAX2", Selector: map[string]string{"rack": "a-1"}}
	base := []string{"caphv-use=allow", "caphvlabel:deviceType=s1.small", "caphvlabel:rack=a-1"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	tests := []struct {
		name     string
		tags     []string
		location string
		want     SkipReason
	}{
		{name: "eligible", tags: base, location: "LAX2"},
		{name: "region is a facility code, any case", tags: base, location: "lax2"},
		{name: "operator tags of other tools do not matter", tags: with("team=blue", "caphvlabel:extra=1"), location: "LAX2"},
		{name: "not allowed", tags: base[1:], location: "LAX2", want: SkipNotAllowed},
		{name: "caphv-use with another value", tags: append([]string{"caphv-use=deny"}, base[1:]...), location: "LAX2", want: SkipNotAllowed},
		{name: "another device type", tags: []string{"caphv-use=allow", "caphvlabel:deviceType=s1.large", "caphvlabel:rack=a-1"}, location: "LAX2", want: SkipDeviceType},
		{name: "no device type", tags: []string{"caphv-use=allow", "caphvlabel:rack=a-1"}, location: "LAX2", want: SkipDeviceType},
		{name: "selector label missing", tags: base[:2], location: "LAX2", want: SkipSelector},
		{name: "selector label differs", tags: []string{"caphv-use=allow", "caphvlabel:deviceType=s1.small", "caphvlabel:rack=b-2"}, location: "LAX2", want: SkipSelector},
		{name: "a plain tag is not a label", tags: []string{"caphv-use=allow", "caphvlabel:deviceType=s1.small", "rack=a-1"}, location: "LAX2", want: SkipSelector},
		{name: "another region", tags: base, location: "NYC1", want: SkipRegion},
		{name: "permanent error", tags: with("caphv-permanent-error=reloading-since-x"), location: "LAX2", want: SkipPermanentError},
		{name: "another pool's", tags: with("hyperfleet-nodepool=other"), location: "LAX2", want: SkipOwned},
		{name: "a claim in progress", tags: with("hyperfleet-claim=1-x"), location: "LAX2", want: SkipOwned},
		{name: "CAPHV's", tags: with("caphv-cluster-name=prod"), location: "LAX2", want: SkipOwned},
		{name: "CAPHV's machine", tags: with("caphv-machine-name=prod-cp-0"), location: "LAX2", want: SkipOwned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := eligibility(hvclient.Device{ID: 1, Location: tt.location, Tags: tt.tags}, req)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestSkipSummary(t *testing.T) {
	require.Equal(t, "none skipped", skipSummary(nil))
	require.Equal(t, "1 without caphv-use=allow, 4 in another region, 2 owned by another pool",
		skipSummary(map[SkipReason]int{SkipOwned: 2, SkipRegion: 4, SkipNotAllowed: 1, SkipSelector: 0}))
}

func TestRendezvous(t *testing.T) {
	var devices []hvclient.Device
	for id := range int32(12) {
		devices = append(devices, hvclient.Device{ID: 100 + id})
	}
	ids := func(ds []hvclient.Device) []int32 {
		out := make([]int32, len(ds))
		for i, d := range ds {
			out[i] = d.ID
		}
		return out
	}
	a := ids(rendezvous("pool-a", devices))
	require.Equal(t, a, ids(rendezvous("pool-a", append(devices[6:], devices[:6]...))), "the order depends on the devices, not on the list's")
	require.Equal(t, a[1:], ids(rendezvous("pool-a", deleteID(devices, a[0]))), "a device taken away leaves the others' order")
	require.NotEqual(t, a, ids(rendezvous("pool-b", devices)), "pools prefer different devices")
	require.ElementsMatch(t, ids(devices), a)
}

func deleteID(ds []hvclient.Device, id int32) []hvclient.Device {
	var out []hvclient.Device
	for _, d := range ds {
		if d.ID != id {
			out = append(out, d)
		}
	}
	return out
}
