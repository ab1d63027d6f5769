package placement

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestOutcomes(t *testing.T) {
	onA := Placement{ManagementCluster: "mc-a", Region: "us-east-1"}
	transient, _ := failed(ReasonManagementClustersUnavailable, errors.New("connection refused"))
	tests := []struct {
		name      string
		got       adapter.Outcome
		available conditions.Reported
		placed    conditions.Reported
		data      map[string]any
		final     bool
		requeue   time.Duration
	}{
		{
			name:      "placed",
			got:       placed(onA),
			available: conditions.Reported{Status: conditions.True, Reason: ReasonPlaced, Message: "mc-a"},
			placed:    conditions.Reported{Type: ConditionPlaced, Status: conditions.True, Reason: ReasonPlaced, Message: "placed on mc-a in us-east-1"},
			data:      map[string]any{DataManagementCluster: "mc-a", DataRegion: "us-east-1"},
		},
		{
			name:      "placed where no region is named",
			got:       placed(Placement{ManagementCluster: "mc-b"}),
			available: conditions.Reported{Status: conditions.True, Reason: ReasonPlaced, Message: "mc-b"},
			placed:    conditions.Reported{Type: ConditionPlaced, Status: conditions.True, Reason: ReasonPlaced, Message: "placed on mc-b"},
			data:      map[string]any{DataManagementCluster: "mc-b", DataRegion: ""},
		},
		{
			name: "nothing fits",
			got:  noCapacity([]string{"mc-a: full (2/2 hosted clusters)", "mc-b: cordoned"}, 3*time.Second),
			available: conditions.Reported{Status: conditions.False, Reason: ReasonNoCapacity,
				Message: "no management cluster fits: mc-a: full (2/2 hosted clusters); mc-b: cordoned"},
			placed: conditions.Reported{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonNoCapacity,
				Message: "no management cluster fits: mc-a: full (2/2 hosted clusters); mc-b: cordoned"},
			requeue: 3 * time.Second,
		},
		{
			name:      "none registered",
			got:       noCapacity(nil, time.Second),
			available: conditions.Reported{Status: conditions.False, Reason: ReasonNoCapacity, Message: "no management cluster is registered"},
			placed:    conditions.Reported{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonNoCapacity, Message: "no management cluster is registered"},
			requeue:   time.Second,
		},
		{
			name:      "could not decide",
			got:       transient,
			available: conditions.Reported{Status: conditions.False, Reason: ReasonManagementClustersUnavailable, Message: "connection refused"},
			placed:    conditions.Reported{Type: ConditionPlaced, Status: conditions.Unknown, Reason: ReasonManagementClustersUnavailable, Message: "connection refused"},
		},
		{
			name: "waiting for the applier",
			got:  waiting(onA, "hostedcluster-applier", 2*time.Second),
			available: conditions.Reported{Status: conditions.False, Reason: ReasonWaitingForHostedClusterRemoval,
				Message: "keeping the slot on mc-a until hostedcluster-applier has removed the HostedCluster"},
			placed: conditions.Reported{Type: ConditionPlaced, Status: conditions.True, Reason: ReasonWaitingForHostedClusterRemoval,
				Message: "keeping the slot on mc-a until hostedcluster-applier has removed the HostedCluster"},
			data:    map[string]any{DataManagementCluster: "mc-a", DataRegion: "us-east-1"},
			requeue: 2 * time.Second,
		},
		{
			name:      "released",
			got:       released(onA),
			available: conditions.Reported{Status: conditions.False, Reason: ReasonReleased, Message: "the slot on mc-a is free"},
			placed:    conditions.Reported{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonReleased, Message: "the slot on mc-a is free"},
			data:      map[string]any{DataManagementCluster: "mc-a", DataRegion: "us-east-1"},
			final:     true,
		},
		{
			name:      "never placed",
			got:       neverPlaced(),
			available: conditions.Reported{Status: conditions.False, Reason: ReasonNeverPlaced, Message: "deleted before it was placed"},
			placed:    conditions.Reported{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonNeverPlaced, Message: "deleted before it was placed"},
			final:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.available, tt.got.Available)
			require.Equal(t, []conditions.Reported{tt.placed}, tt.got.Conditions)
			require.Equal(t, tt.data, tt.got.Data)
			require.Equal(t, tt.final, tt.got.Finalized)
			require.Equal(t, tt.requeue, tt.got.RequeueAfter)
		})
	}
}

// The ledger reads a placement back from every report but a finalized one, whose slot is free.
func TestPlacementOf(t *testing.T) {
	data := map[string]any{DataManagementCluster: "mc-a", DataRegion: "us-east-1"}
	tests := []struct {
		name   string
		report *adapter.Report
		want   Placement
		ok     bool
	}{
		{"no report", nil, Placement{}, false},
		{"placed", &adapter.Report{Data: data}, Placement{ManagementCluster: "mc-a", Region: "us-east-1"}, true},
		{"waiting for removal", &adapter.Report{Data: data, Conditions: []conditions.Condition{
			{Type: conditions.Finalized, Status: conditions.False}}}, Placement{ManagementCluster: "mc-a", Region: "us-east-1"}, true},
		{"released", &adapter.Report{Data: data, Conditions: []conditions.Condition{
			{Type: conditions.Finalized, Status: conditions.True}}}, Placement{}, false},
		{"not placed", &adapter.Report{}, Placement{}, false},
		{"not a string", &adapter.Report{Data: map[string]any{DataManagementCluster: 7}}, Placement{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := placementOf(tt.report)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}
