package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

func TestProgressBar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		done, total int
		want        string
	}{
		{0, 0, "[----------] 0/0"},
		{0, 10, "[----------] 0/10"},
		{5, 10, "[#####-----] 5/10"},
		{1, 3, "[###-------] 1/3"},
		{299, 300, "[#########-] 299/300"}, // full only when every cluster is done
		{3, 3, "[##########] 3/3"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, progressBar(tc.done, tc.total))
	}
}

func TestHeldWord(t *testing.T) {
	t.Parallel()
	tests := []struct{ reason, want string }{
		{"", "-"},
		{outsideUpgradeWindow, "window"},
		{rollout.HeldWaitingForStage, "stage"},
		{rollout.HeldWaitingForTurn, "turn"},
		{rollout.HeldRolloutPaused, "rollout-paused"},
		{rollout.HeldFailed, "failed"},
		{rollout.BlockedRiskNotAccepted, "risk"},
		{rollout.BlockedNoUpdatePath, "path"},
		{rollout.BlockedPathUnknown, "path"},
		{rollout.BlockedNotInGraph, "pulled"},
		{"SomethingNew", "SomethingNew"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, heldWord(tc.reason), tc.reason)
	}
}

// goldenRollout is a rollout in its second stage, with a failure, as the version resolver writes it.
const goldenRollout = `{"release": "4.16.5", "baseline": "4.16.3", "state": "Progressing", "message": "stage early: 12 of 30 upgraded",
	"revision": 7, "stages": [
		{"name": "canary", "state": "Complete", "clusters": 3, "upgraded": 3, "in_progress": 0, "waiting_window": 0, "failed": 0, "blocked": 0, "pending": 0,
		 "complete_time": "2026-01-01T00:30:00Z", "soak_until": "2026-01-01T01:00:00Z"},
		{"name": "early", "state": "Active", "clusters": 30, "upgraded": 12, "in_progress": 3, "waiting_window": 2, "failed": 1, "blocked": 1, "pending": 11},
		{"name": "rest", "state": "Waiting", "clusters": 267, "upgraded": 0, "in_progress": 0, "waiting_window": 0, "failed": 0, "blocked": 4, "pending": 263}],
	"failed": [{"id": "66666666-6666-4666-8666-666666666666", "name": "early-7", "stage": "early", "version": "4.16.5",
		"reason": "DegradedAfterUpgrade", "message": "Degraded=True (ClusterOperatorDegraded)\nafter the upgrade", "time": "2026-01-01T00:50:00Z", "generation": 3}],
	"admitted": {"77777777-7777-4777-8777-777777777777": ["4.16.5", "2026-01-01T01:00:00Z", ""]}}`

// The rollout's table against files in testdata/golden (HYPERFLEET_UPDATE_GOLDEN=1 rewrites them).
func TestGoldenRollout(t *testing.T) {
	t.Parallel()
	soaking := `{"release": "4.16.5", "state": "Paused", "message": "paused by spec.rollout.paused", "revision": 2, "stages": [
		{"name": "canary", "state": "Soaking", "clusters": 1, "upgraded": 1, "in_progress": 0, "waiting_window": 0, "failed": 0, "blocked": 0, "pending": 0,
		 "soak_until": "2026-01-01T01:30:00Z"},
		{"name": "all", "state": "Paused", "clusters": 0, "upgraded": 0, "in_progress": 0, "waiting_window": 0, "failed": 0, "blocked": 0, "pending": 0}]}`
	halted := `{"release": "4.16.6", "state": "PausedByFailures", "message": "stage canary: 2 failed, more than its budget of 1", "revision": 9,
		"stages": [{"name": "canary", "state": "Active", "clusters": 3, "upgraded": 1, "in_progress": 0, "waiting_window": 0, "failed": 2, "blocked": 0, "pending": 0}],
		"failed": [
			{"id": "88888888-8888-4888-8888-888888888888", "name": "canary-1", "stage": "canary", "version": "4.16.6", "reason": "ProgressDeadlineExceeded", "message": "not upgraded 1h after it started", "time": "2026-01-01T00:00:00Z"},
			{"id": "99999999-9999-4999-8999-999999999999", "stage": "canary", "version": "4.16.6", "reason": "DegradedAfterUpgrade", "time": "2026-01-01T01:00:00Z"}]}`
	tests := []struct {
		name, rollout string
		specPaused    bool
	}{
		{"rollout.progressing", goldenRollout, false},
		{"rollout.paused-soaking", soaking, true},
		{"rollout.resumed-not-seen", soaking, false},
		{"rollout.paused-by-failures", halted, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st rollout.Status
			require.NoError(t, json.Unmarshal([]byte(tc.rollout), &st))
			var out bytes.Buffer
			require.NoError(t, printRollout(&out, "versionstream/stable-4-16", &st, tc.specPaused, goldenNow))
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			if os.Getenv("HYPERFLEET_UPDATE_GOLDEN") != "" {
				require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "no golden file: run with HYPERFLEET_UPDATE_GOLDEN=1 and check what it wrote")
			require.Equal(t, string(want), out.String())
		})
	}
}

// reportData posts an adapter's report with data about a root resource.
func (s *testAPI) reportData(tb testing.TB, plural string, id uuid.UUID, adapter string, generation int64, data map[string]any) {
	tb.Helper()
	rep := api.AdapterStatusReport{Adapter: adapter, ObservedGeneration: generation, ObservedTime: time.Now().UTC(), Data: &data,
		Conditions: []api.ReportedCondition{cond(conditions.Available, conditions.True, "AsExpected")}}
	k := api.Kinds().Lookup(plural)
	require.NotNil(tb, k, plural)
	answer, err := api.ReadAnswer[api.AdapterStatus](s.client.ClientInterface.(*api.Client).PutResourceStatus(testContext(tb), k, api.ResourceRef{ID: id}, rep))
	require.NoError(tb, err)
	require.Contains(tb, []int{http.StatusOK, http.StatusCreated}, answer.StatusCode(), "body: %s", answer.Body)
}

const rolloutSpec = `{"target_version": "4.16", "rollout": {"progress_deadline": "45m", "stages": [
	{"name": "canary", "selector": "hyperfleet.io/stage=canary", "max_at_once": 1, "soak": "30s"},
	{"name": "rest"}]}}`

func TestRolloutCommands(t *testing.T) {
	t.Parallel()
	s := startAPI(t, true)
	c := newCLI(t, s)
	c.env["HYPERFLEET_TOKEN"] = s.mint("pat", auth.RolePlatform, auth.RoleUser)
	c.ok(t, "create", "versionstream", "stable-4-16", "--spec", rolloutSpec)
	c.ok(t, "create", "versionstream", "plain", "--spec", `{"target_version": "4.16"}`)
	id := c.idOf(t, "vs", "stable-4-16")

	t.Run("no report yet", func(t *testing.T) {
		require.Contains(t, c.fails(t, exitError, "rollout", "status", "stable-4-16"),
			"error: no rollout to show for versionstream/stable-4-16: the version-resolver has not reported on it yet")
	})

	t.Run("a resolver without rollouts", func(t *testing.T) {
		s.reportData(t, "versionstreams", c.idOf(t, "vs", "plain"), resolver, 1, map[string]any{"release_image": "quay.io/x@sha256:1", "resolved_version": "4.16.3"})
		require.Contains(t, c.fails(t, exitError, "rollout", "status", "plain", "-o", "json"),
			"no rollout to show for versionstream/plain: the version-resolver reports no rollout on it (a resolver from before staged rollouts); it resolves 4.16.3 for every cluster at once")
	})

	t.Run("status", func(t *testing.T) {
		var st map[string]any
		require.NoError(t, json.Unmarshal([]byte(goldenRollout), &st))
		s.reportData(t, "versionstreams", id, resolver, 1, map[string]any{"release_image": "quay.io/x@sha256:5", "resolved_version": "4.16.5", "rollout": st})
		out := c.ok(t, "rollout", "status", "stable-4-16")
		require.Contains(t, out, "versionstream/stable-4-16: rolling out 4.16.5 (new clusters install 4.16.3 until it completes)\nState: Progressing: stage early: 12 of 30 upgraded\n")
		require.Regexp(t, `(?m)^early\s+Active\s+\[####------\] 12/30\s+3\s+2\s+1\s+1\s+11\s+-$`, out)
		require.Regexp(t, `(?m)^early-7\s+early\s+4\.16\.5\s+DegradedAfterUpgrade\s+\S+\s+Degraded=True \(ClusterOperatorDegraded\) after the upgrade$`, out)

		var doc rollout.Status
		require.NoError(t, json.Unmarshal([]byte(c.ok(t, "rollout", "status", "stable-4-16", "-o", "json")), &doc))
		require.Equal(t, "4.16.5", doc.Release)
		require.Len(t, doc.Stages, 3)
		require.Contains(t, c.ok(t, "rollout", "status", "stable-4-16", "-o", "yaml"), "release: 4.16.5\n")
	})

	spec := func(t *testing.T) map[string]any {
		t.Helper()
		var obj struct {
			Spec map[string]any `json:"spec"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.ok(t, "get", "vs", "stable-4-16", "-o", "json")), &obj))
		return obj.Spec["rollout"].(map[string]any)
	}

	t.Run("pause and resume keep the policy", func(t *testing.T) {
		require.Equal(t, "versionstream/stable-4-16 rollout paused: no cluster of the stream starts an upgrade until `hyperfleet rollout resume stable-4-16`\n",
			c.ok(t, "rollout", "pause", "stable-4-16"))
		r := spec(t)
		require.Equal(t, true, r["paused"])
		require.Equal(t, "45m", r["progress_deadline"])
		require.Len(t, r["stages"], 2)
		require.Equal(t, "versionstream/stable-4-16 rollout already paused (no change)\n", c.ok(t, "rollout", "pause", "stable-4-16"))
		require.Contains(t, c.ok(t, "rollout", "status", "stable-4-16"), "Paused by spec.rollout.paused; the version resolver has not acted on it yet.")

		before := time.Now().UTC().Truncate(time.Second)
		require.Equal(t, "versionstream/stable-4-16 rollout resumed\n", c.ok(t, "rollout", "resume", "stable-4-16"))
		r = spec(t)
		require.Equal(t, false, r["paused"])
		resumed, err := time.Parse(time.RFC3339, r["resumed_at"].(string))
		require.NoError(t, err)
		require.False(t, resumed.Before(before), "resumed_at %s is now", resumed)
		require.Len(t, r["stages"], 2)
		require.Equal(t, "versionstream/stable-4-16\n", c.ok(t, "rollout", "resume", "stable-4-16", "-o", "name"))
	})

	t.Run("a stream without a policy gets a paused one", func(t *testing.T) {
		c.ok(t, "rollout", "pause", "plain")
		require.Contains(t, c.ok(t, "get", "vs", "plain", "-o", "yaml"), "rollout:\n    paused: true\n")
	})

	t.Run("a user may look but not pause", func(t *testing.T) {
		user := newCLI(t, s)
		user.env["HYPERFLEET_TOKEN"] = s.mint("bob", auth.RoleUser)
		require.Contains(t, user.ok(t, "rollout", "status", "stable-4-16"), "rolling out 4.16.5")
		errOut := user.fails(t, exitError, "rollout", "pause", "stable-4-16")
		require.Contains(t, errOut, "error: pause the rollout of versionstream/stable-4-16 (a stream is a platform object: this needs the platform or admin role): ")
		require.Contains(t, errOut, "(403 Forbidden)")
	})

	t.Run("usage", func(t *testing.T) {
		require.Contains(t, c.fails(t, exitNotFound, "rollout", "status", "nope"), `versionstream "nope" not found`)
		require.Contains(t, c.fails(t, exitUsage, "rollout", "pause"), "accepts 1 arg(s)")
		require.Contains(t, c.fails(t, exitUsage, "rollout", "status", "stable-4-16", "-o", "wide"), "want one of table, json, yaml")
	})
}

// get clusters reads each cluster's version and hold from the applier's report, embedded in the page.
func TestClustersVersionAndHeld(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	for _, name := range []string{"canary-1", "early-1", "held-1", "new-1"} {
		c.ok(t, "create", "cluster", name, "--spec", clusterSpec)
	}
	c.ok(t, "patch", "cluster", "held-1", "--spec", `{"paused": true}`)
	applierData := func(current, target, held string) map[string]any {
		return map[string]any{"current_version": current, "target_version": target, "held_reason": held}
	}
	s.reportData(t, "clusters", c.idOf(t, "cluster", "canary-1"), applierAdapter, 1, applierData("4.16.5", "4.16.5", ""))
	s.reportData(t, "clusters", c.idOf(t, "cluster", "early-1"), applierAdapter, 1, applierData("4.16.3", "4.16.3", rollout.HeldWaitingForStage))
	s.reportData(t, "clusters", c.idOf(t, "cluster", "held-1"), applierAdapter, 2, applierData("4.16.3", "4.16.3", rollout.HeldWaitingForStage))

	out := c.ok(t, "get", "clusters")
	require.Regexp(t, `(?m)^NAME\s+VERSION STREAM\s+VERSION\s+HELD\s+PHASE\s+GENERATION\s+AGE$`, out)
	require.Regexp(t, `(?m)^canary-1\s+stable-4-16\s+4\.16\.5\s+-\s+`, out)
	require.Regexp(t, `(?m)^early-1\s+stable-4-16\s+4\.16\.3\s+stage\s+`, out)
	require.Regexp(t, `(?m)^held-1\s+stable-4-16\s+4\.16\.3\s+paused\s+`, out, "the cluster's own pause comes first")
	require.Regexp(t, `(?m)^new-1\s+stable-4-16\s+<none>\s+-\s+`, out, "no report yet")
	require.Regexp(t, `(?m)^early-1\s+stable-4-16\s+<none>\s+<none>\s+<none>\s+default\s+4\.16\.3\s+4\.16\.3\s+stage\s+`, c.ok(t, "get", "clusters", "-o", "wide"))
	require.NotContains(t, c.ok(t, "get", "clusters", "-o", "json"), "adapter_statuses", "other formats print the resources as they are")

	t.Run("watch", func(t *testing.T) {
		w := c.start(t, "get", "clusters", "--watch")
		w.eventually(t, "the first table", func(out, _ string) bool {
			return regexp.MustCompile(`(?m)^early-1\s+\S+\s+4\.16\.3\s+stage\s`).MatchString(out)
		})
		// A report that changes only its data makes no event (events follow the resource and its aggregate): the
		// new hold shows with the cluster's next change, here a label.
		s.reportData(t, "clusters", c.idOf(t, "cluster", "early-1"), applierAdapter, 1, applierData("4.16.3", "4.16.5", rollout.HeldWaitingForTurn))
		c.ok(t, "patch", "cluster", "early-1", "--labels", "hyperfleet.io/stage=early")
		w.eventually(t, "the changed cluster's report is read again", func(out, _ string) bool {
			return regexp.MustCompile(`(?m)^early-1\s+\S+\s+4\.16\.3\s+turn\s`).MatchString(out)
		})
		r := w.stop(t)
		require.Empty(t, r.err)
	})
}
