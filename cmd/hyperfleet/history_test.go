package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// goldenHistory is a cluster's history as the API returns it: created, two updates, a report that made it Ready,
// a long update, the delete and the removal.
const goldenHistory = `{"kind": "HistoryList", "items": [
	{"seq": 1, "time": "2026-01-01T00:00:00Z", "actor": "alice", "action": "created", "generation": 1, "phase_to": "Pending",
		"changes": {"labels": {"env": "dev"}, "spec": {"version_stream": "stable-4-16"}}},
	{"seq": 4, "time": "2026-01-01T00:01:00Z", "actor": "alice", "action": "updated", "generation": 1,
		"changes": {"labels": {"env": "prod", "team": "core", "old": null}}},
	{"seq": 9, "time": "2026-01-01T00:02:00Z", "actor": "alice", "action": "updated", "generation": 2,
		"changes": {"spec": {"hosted_cluster": {"infrastructure_availability_policy": "HighlyAvailable"}}}},
	{"seq": 12, "time": "2026-01-01T00:05:00Z", "actor": "applier-bot", "action": "status", "generation": 2, "phase_from": "Pending", "phase_to": "Ready",
		"reports": [{"adapter": "hostedcluster-applier", "observed_generation": 2, "conditions": [{"type": "Available", "status": "True"}, {"type": "Health", "status": "False", "reason": "Degraded"}]}]},
	{"seq": 20, "time": "2026-01-01T00:06:00Z", "actor": "bob", "action": "updated", "generation": 2,
		"changes": {"deletion_protection": true, "labels": {"a-rather-long-label-name": "with-a-rather-long-value", "another": "one-more-to-cut"}}},
	{"seq": 30, "time": "2026-01-01T01:00:00Z", "actor": "alice", "action": "deleting", "generation": 3, "phase_from": "Ready", "phase_to": "Deleting"},
	{"seq": 31, "time": "2026-01-01T01:02:03Z", "actor": "applier-bot", "action": "removed", "generation": 3, "phase_from": "Deleting"}
]}`

// The history table against testdata/golden/history.table.golden (HYPERFLEET_UPDATE_GOLDEN=1 rewrites it).
func TestGoldenHistory(t *testing.T) {
	var list api.HistoryList
	require.NoError(t, json.Unmarshal([]byte(goldenHistory), &list))
	var out bytes.Buffer
	require.NoError(t, printHistory(&out, list.Items))
	path := filepath.Join("testdata", "golden", "history.table.golden")
	if os.Getenv("HYPERFLEET_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run with HYPERFLEET_UPDATE_GOLDEN=1 and check what it wrote")
	require.Equal(t, string(want), out.String())
}

func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	c.ok(t, "create", "cluster", "demo", "--spec", clusterSpec)
	id := c.idOf(t, "cluster", "demo")
	c.ok(t, "patch", "cluster", "demo", "--labels", "team=core")
	s.report(t, "clusters", id, applier, 1, cond(conditions.Available, conditions.True, "AsExpected"))

	out := c.ok(t, "history", "cluster", "demo")
	require.Regexp(t, `^TIME\s+ACTOR\s+ACTION\s+GENERATION\s+PHASE\s+CHANGES\n`+
		`\S+Z\s+dev-admin\s+created\s+1\s+Pending\s+labels=\{\}, spec\.\S+.*\n`+
		`\S+Z\s+dev-admin\s+updated\s+1\s+<none>\s+labels\.team=core\n`+
		`\S+Z\s+dev-admin\s+status\s+1\s+Pending->Ready\s+applier@1: Available\n$`, out)
	var list api.HistoryList
	require.NoError(t, json.Unmarshal([]byte(c.ok(t, "history", "cl", "demo", "-o", "json")), &list))
	require.Len(t, list.Items, 3)
	require.Equal(t, map[string]any{"labels": map[string]any{"team": "core"}}, *list.Items[1].Changes)

	// The history outlives the cluster: by its id once it is gone.
	c.ok(t, "delete", "cluster", "demo", "--force", "--yes")
	r := c.run(t, "history", "cluster", "demo")
	require.Equal(t, exitNotFound, r.code, "by name there is nothing to find: %s", r.err)
	gone := c.ok(t, "history", "cluster", id.String())
	require.Regexp(t, regexp.MustCompile(`(?m)^\S+Z\s+dev-admin\s+force_deleted\s+1\s+Ready->\s+<none>$`), gone)
}
