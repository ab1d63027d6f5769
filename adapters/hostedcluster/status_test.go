package hostedcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

const (
	imageA = "quay.io/openshift-release-dev/ocp-release:4.16.2-x86_64"
	imageB = "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"
)

func mustSchedule(tb testing.TB, windows ...schedule.WindowSpec) *schedule.Schedule {
	tb.Helper()
	s, err := schedule.Parse("UTC", windows, nil)
	require.NoError(tb, err)
	return s
}

func TestDecideRollout(t *testing.T) {
	// Saturdays 02:00–06:00 UTC.
	weekend := mustSchedule(t, schedule.WindowSpec{Days: []string{"Saturday"}, Start: "02:00", Duration: "4h"})
	monday := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	saturday := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	nextWindow := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		running string
		sched   *schedule.Schedule
		now     time.Time
		want    Rollout
	}{
		{"a new cluster installs at once, whatever the schedule", "", weekend, monday, Rollout{Image: imageB, Target: imageB}},
		{"already at the stream's image", imageB, weekend, monday, Rollout{Image: imageB, Target: imageB}},
		{"no schedule: upgrade at once", imageA, nil, monday, Rollout{Image: imageB, Target: imageB}},
		{"outside the window: keep the running image", imageA, weekend, monday,
			Rollout{Image: imageA, Target: imageB, Waiting: true, NextOpen: nextWindow}},
		{"inside the window: roll", imageA, weekend, saturday, Rollout{Image: imageB, Target: imageB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideRollout(tt.running, imageB, tt.sched, tt.now)
			require.True(t, got.NextOpen.Equal(tt.want.NextOpen), "next open %s, want %s", got.NextOpen, tt.want.NextOpen)
			got.NextOpen, tt.want.NextOpen = time.Time{}, time.Time{}
			require.Equal(t, tt.want, got)
		})
	}
}

// hostedCluster builds a HostedCluster as HyperShift (or hypershift-sim) leaves it.
func hostedCluster(image string, available, progressing string, history ...map[string]any) *unstructured.Unstructured {
	cond := func(typ, status, reason string) any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": typ + " is " + status}
	}
	items := make([]any, len(history))
	for i, h := range history {
		items[i] = h
	}
	status := map[string]any{
		"conditions": []any{cond("Available", available, "AsExpected"), cond("Progressing", progressing, "AsExpected"),
			cond("Degraded", "False", "AsExpected"), cond("ValidReleaseImage", "True", "AsExpected")},
		"version":              map[string]any{"history": items},
		"controlPlaneEndpoint": map[string]any{"host": "api.c.example.com", "port": int64(6443)},
		"kubeconfig":           map[string]any{"name": "c-admin-kubeconfig"},
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "c", "labels": map[string]any{LabelClusterID: "id"}},
		"spec":     map[string]any{"release": map[string]any{"image": image}},
		"status":   status,
	}}
}

func entry(state, image, version string) map[string]any {
	return map[string]any{"state": state, "image": image, "version": version}
}

func conditionOf(out []conditions.Reported, typ string) conditions.Reported {
	for _, c := range out {
		if c.Type == typ {
			return c
		}
	}
	return conditions.Reported{}
}

func TestOutcome(t *testing.T) {
	upToDate := Plan{TargetImage: imageB, TargetVersion: "4.16.3", Roll: Rollout{Image: imageB, Target: imageB}}
	tests := []struct {
		name        string
		plan        Plan
		hc          *unstructured.Unstructured
		available   conditions.Status
		pending     conditions.Reported
		data        map[string]any
		wantSettled bool
	}{
		{
			name: "just applied: HyperShift has not reported", plan: upToDate,
			hc:        &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"release": map[string]any{"image": imageB}}}},
			available: conditions.False,
			pending:   conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonAtReleaseImage},
			data: map[string]any{DataHostedCluster: "clusters/c", DataAppliedReleaseImage: imageB, DataDesiredReleaseImage: imageB,
				DataTargetVersion: "4.16.3", DataHeldReason: ""},
		},
		{
			name: "available at its image", plan: upToDate,
			hc:        hostedCluster(imageB, "True", "False", entry("Completed", imageB, "4.16.3")),
			available: conditions.True,
			pending:   conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonAtReleaseImage},
			data: map[string]any{DataHostedCluster: "clusters/c", DataAppliedReleaseImage: imageB, DataDesiredReleaseImage: imageB,
				DataCurrentVersion: "4.16.3", DataUpgradeState: "Completed", DataAPIEndpoint: "api.c.example.com:6443",
				DataKubeconfigSecret: "c-admin-kubeconfig", DataTargetVersion: "4.16.3", DataHeldReason: ""},
			wantSettled: true,
		},
		{
			name: "rolling to a new image", plan: upToDate,
			hc:        hostedCluster(imageB, "True", "True", entry("Partial", imageB, "4.16.3"), entry("Completed", imageA, "4.16.2")),
			available: conditions.True,
			pending:   conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonRolling},
			data: map[string]any{DataHostedCluster: "clusters/c", DataAppliedReleaseImage: imageB, DataDesiredReleaseImage: imageB,
				DataCurrentVersion: "4.16.2", DataUpgradeState: "Partial", DataAPIEndpoint: "api.c.example.com:6443",
				DataKubeconfigSecret: "c-admin-kubeconfig", DataTargetVersion: "4.16.3", DataHeldReason: ""},
		},
		{
			name: "waiting for the window", plan: Plan{TargetImage: imageB, TargetVersion: "4.16.3",
				Roll: Rollout{Image: imageA, Target: imageB, Waiting: true, NextOpen: time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)}},
			hc:        hostedCluster(imageA, "True", "False", entry("Completed", imageA, "4.16.2")),
			available: conditions.True,
			pending:   conditions.Reported{Type: ConditionUpgradePending, Status: conditions.True, Reason: ReasonOutsideUpgradeWindow},
			data: map[string]any{DataHostedCluster: "clusters/c", DataAppliedReleaseImage: imageA, DataDesiredReleaseImage: imageB,
				DataCurrentVersion: "4.16.2", DataUpgradeState: "Completed", DataAPIEndpoint: "api.c.example.com:6443",
				DataKubeconfigSecret: "c-admin-kubeconfig", DataNextUpgradeWindow: "2026-12-05T02:00:00Z",
				DataTargetVersion: "4.16.3", DataHeldReason: ReasonOutsideUpgradeWindow},
			wantSettled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := observe(tt.hc)
			out := outcome("clusters/c", tt.plan, o)
			require.Equal(t, tt.available, out.Available.Status)
			pending := conditionOf(out.Conditions, ConditionUpgradePending)
			require.Equal(t, tt.pending.Status, pending.Status)
			require.Equal(t, tt.pending.Reason, pending.Reason)
			require.Equal(t, tt.data, out.Data)
			require.Equal(t, tt.wantSettled, settled(tt.plan.Roll, o))
			for _, typ := range []string{ConditionProgressing, ConditionDegraded, ConditionValidReleaseImage} {
				c := conditionOf(out.Conditions, typ)
				require.Equal(t, typ, c.Type, "every mirrored condition is reported")
				require.NotEmpty(t, c.Reason)
			}
		})
	}
}
