package hypershiftsim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
)

const image4162 = "quay.io/openshift-release-dev/ocp-release:4.16.2-x86_64"

// A failing release's rollout stays Partial when due; Degraded says so only for FailDegraded; a cluster that had
// completed a rollout stays Available; clearing the failure lets the rollout complete at the next look.
func TestNextStatusFailingRelease(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	delay := 10 * time.Second
	tests := []struct {
		name          string
		mode          FailMode
		upgrade       bool // the failing release is an upgrade from a completed one
		wantDegraded  string
		wantAvailable string
	}{
		{"degraded install", FailDegraded, false, "True", "False"},
		{"stuck install", FailStuck, false, "False", "False"},
		{"degraded upgrade", FailDegraded, true, "True", "True"},
		{"stuck upgrade", FailStuck, true, "False", "True"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cur status
			gen := int64(1)
			if tt.upgrade {
				cur = nextStatus(cur, hc(image4162, gen), t0, 0, "fallback", nil).status
				cur = nextStatus(cur, hc(image4162, gen), t0, 0, "fallback", nil).status
				gen++
			}
			fails := func(v string) FailMode {
				if v == "4.16.3" {
					return tt.mode
				}
				return ""
			}
			cur = nextStatus(cur, hc(image416, gen), t0, delay, "fallback", fails).status
			due := nextStatus(cur, hc(image416, gen), t0.Add(delay), delay, "fallback", fails)
			require.Equal(t, "Partial@4.16.3", history(due.status)[0], "the failing rollout never completes")
			require.Equal(t, tt.mode, due.failed)
			require.True(t, due.wait, "looked at again, so that clearing the failure completes it")
			require.Equal(t, delay, due.after)
			require.Equal(t, tt.wantDegraded, string(meta.FindStatusCondition(due.status.Conditions, ConditionDegraded).Status))
			require.Equal(t, tt.wantAvailable, string(meta.FindStatusCondition(due.status.Conditions, ConditionAvailable).Status))
			require.Equal(t, "True", string(meta.FindStatusCondition(due.status.Conditions, ConditionProgressing).Status))

			cleared := nextStatus(due.status, hc(image416, gen), t0.Add(2*delay), delay, "fallback", nil)
			require.Equal(t, "Completed@4.16.3", history(cleared.status)[0])
			require.Equal(t, "False", string(meta.FindStatusCondition(cleared.status.Conditions, ConditionDegraded).Status))
			require.Equal(t, "True", string(meta.FindStatusCondition(cleared.status.Conditions, ConditionAvailable).Status))
		})
	}
}

func TestFailuresSetAndShare(t *testing.T) {
	var fs Failures
	for _, bad := range []Failure{{Mode: FailStuck}, {Version: "4.16.3", Mode: "Broken"}, {Version: "4.16.3", Mode: FailStuck, Percent: 101},
		{Version: "4.16.3", Mode: FailStuck, Percent: -1}} {
		require.ErrorIs(t, fs.Set(bad), ErrInvalidFailure, "%+v", bad)
	}
	require.Empty(t, fs.List())
	require.Equal(t, FailMode(""), (*Failures)(nil).modeFor("ns", "a", "4.16.3"), "nil fails nothing")

	require.NoError(t, fs.Set(Failure{Version: "4.16.3", Mode: FailDegraded}))
	require.NoError(t, fs.Set(Failure{Version: "4.16.4", Mode: FailStuck, Percent: 30}))
	require.Equal(t, []Failure{{Version: "4.16.3", Mode: FailDegraded, Percent: 100}, {Version: "4.16.4", Mode: FailStuck, Percent: 30}}, fs.List())
	hit := 0
	for i := range 1000 {
		name := fmt.Sprintf("c%d", i)
		require.Equal(t, FailDegraded, fs.modeFor("ns", name, "4.16.3"), "100%% hits every cluster")
		require.Equal(t, FailMode(""), fs.modeFor("ns", name, "4.16.2"), "other releases roll")
		if m := fs.modeFor("ns", name, "4.16.4"); m == FailStuck {
			hit++
			require.Equal(t, m, fs.modeFor("ns", name, "4.16.4"), "the same clusters every time")
		}
	}
	require.InDelta(t, 300, hit, 60, "about 30%% of 1000 clusters")

	fs.Clear("4.16.3")
	require.Equal(t, FailMode(""), fs.modeFor("ns", "c1", "4.16.3"))
	fs.Clear("")
	require.Empty(t, fs.List())
}
