package adapter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestPaused(t *testing.T) {
	tests := []struct {
		spec string
		want bool
	}{
		{`{"paused": true, "replicas": 3}`, true},
		{`{"paused": false}`, false},
		{`{"replicas": 3}`, false},
		{`{"paused": "yes"}`, false}, // not a boolean: the reconciler reports the spec, the runtime does not hold
		{`not json`, false},
		{``, false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			require.Equal(t, tt.want, Paused(&Object{Spec: json.RawMessage(tt.spec)}))
		})
	}
}

func TestPausedReport(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, status conditions.Status, reason, msg string) conditions.Condition {
		return conditions.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: 4}
	}
	paused := conditions.Reported{Type: conditions.Paused, Status: conditions.True, Reason: conditions.ReasonPaused, Message: pausedMessage}
	notApplied := conditions.Reported{Type: conditions.Applied, Status: conditions.False, Reason: conditions.ReasonPaused, Message: pausedMessage}
	tests := []struct {
		name     string
		last     *Report
		want     []conditions.Reported
		wantData map[string]any
	}{
		{
			name: "a resource created paused: nothing made, nothing wrong",
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.False, Reason: conditions.ReasonPaused, Message: pausedMessage},
				notApplied,
				{Type: conditions.Health, Status: conditions.True, Reason: conditions.ReasonPaused, Message: pausedMessage},
				paused,
			},
		},
		{
			name: "the last report's Available, Health, own conditions and data carry over; Applied does not",
			last: &Report{ObservedGeneration: 4, Conditions: []conditions.Condition{
				cond(conditions.Available, conditions.True, "AsExpected", "running 4.16.2"),
				cond(conditions.Applied, conditions.True, conditions.ReasonReconciled, ""),
				cond(conditions.Health, conditions.True, conditions.ReasonReconciled, ""),
				cond("UpgradePending", conditions.False, "AtReleaseImage", ""),
			}, Data: map[string]any{"current_version": "4.16.2"}},
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.True, Reason: "AsExpected", Message: "running 4.16.2"},
				notApplied,
				{Type: conditions.Health, Status: conditions.True, Reason: conditions.ReasonReconciled},
				paused,
				{Type: "UpgradePending", Status: conditions.False, Reason: "AtReleaseImage"},
			},
			wantData: map[string]any{"current_version": "4.16.2"},
		},
		{
			name: "a failing adapter stays failing (Degraded stays Degraded), and a stale Finalized is not repeated",
			last: &Report{ObservedGeneration: 4, Conditions: []conditions.Condition{
				cond(conditions.Available, conditions.False, "Unavailable", "down"),
				cond(conditions.Health, conditions.False, conditions.ReasonTransientError, "down"),
				cond(conditions.Finalized, conditions.False, conditions.ReasonFinalizing, ""),
				cond(conditions.Paused, conditions.True, conditions.ReasonPaused, "an older message"),
			}},
			want: []conditions.Reported{
				{Type: conditions.Available, Status: conditions.False, Reason: "Unavailable", Message: "down"},
				notApplied,
				{Type: conditions.Health, Status: conditions.False, Reason: conditions.ReasonTransientError, Message: "down"},
				paused,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &Object{Kind: "Cluster", ID: "c", Generation: 5, Spec: json.RawMessage(`{"paused":true}`), LastReport: tt.last}
			got := pausedReport("hostedcluster-applier", obj, now, map[string]any{"replica": "r"})
			require.Equal(t, tt.want, reportedOf(t, got))
			require.Equal(t, int64(5), got.ObservedGeneration, "reported at the current generation")
			if tt.wantData == nil {
				require.Nil(t, got.Data)
			} else {
				require.Equal(t, tt.wantData, *got.Data)
			}
			_, err := checked(got, now)
			require.NoError(t, err, "the API accepts it")
		})
	}
}
