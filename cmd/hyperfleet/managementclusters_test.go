package main

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// placer is the adapter whose report says where a cluster is placed (adapters/placement).
const placer = "cluster-placer"

// TestManagementClusters drives the ManagementCluster kind as docs/management-clusters.md and the README's Try it
// do, against a real API: a platform user registers two, the hostedcluster-applier's reports fill CAPACITY, the placer's
// report fills a cluster's MANAGEMENT CLUSTER, deleting the one a cluster is placed on is a conflict (exit 4),
// cordoning is a patch, and an unused one is deleted.
func TestManagementClusters(t *testing.T) {
	t.Parallel()
	s := startAPIWith(t, true, func(cfg *server.Config) {
		cfg.RequiredAdapters = map[string][]string{"versionstream": {resolver}, "cluster": {placer, applierAdapter}, "managementcluster": {applierAdapter}}
	})
	c := newCLI(t, s)
	c.env["HYPERFLEET_TOKEN"] = s.mint("pat", auth.RolePlatform, auth.RoleUser)

	for _, mc := range []struct{ name, capacity string }{{"mc-a", "2"}, {"mc-b", "1"}} {
		require.Equal(t, "managementcluster/"+mc.name+" created\n", c.ok(t, "create", "managementcluster", mc.name, "--spec",
			`{"region": "local", "capacity": {"max_hosted_clusters": `+mc.capacity+`}, "credentials": {"kubeconfig": "`+mc.name+`"}}`))
	}
	a, b := c.idOf(t, "mc", "mc-a"), c.idOf(t, "mc", "mc-b")
	s.reportMessage(t, "managementclusters", a, applierAdapter, 1, "0/2 hosted clusters")
	s.reportMessage(t, "managementclusters", b, applierAdapter, 1, "0/1 hosted clusters")
	out := c.ok(t, "get", "managementclusters")
	require.Regexp(t, `^NAME\s+REGION\s+SCHEDULABLE\s+CAPACITY\s+PHASE\s+GENERATION\s+AGE\n`, out)
	require.Regexp(t, regexp.MustCompile(`(?m)^mc-a\s+local\s+true\s+0/2 hosted clusters\s+Ready\s+1\s+\d+s$`), out)
	require.Regexp(t, regexp.MustCompile(`(?m)^mc-b\s+local\s+true\s+0/1 hosted clusters\s+Ready\s+1\s+\d+s$`), c.ok(t, "get", "mc", "mc-b"))
	require.Regexp(t, regexp.MustCompile(`(?m)^mc-a\s+local\s+true\s+0/2 hosted clusters\s+mc-a\s+Ready\s`), c.ok(t, "get", "mc", "-o", "wide"), "CREDENTIALS")

	c.seedStream(t, "stable-4-16")
	c.ok(t, "create", "cluster", "demo", "--spec", clusterSpec)
	demo := c.idOf(t, "cluster", "demo")
	s.reportPlacement(t, demo, "mc-a")
	require.Regexp(t, regexp.MustCompile(`(?m)^demo\s+stable-4-16\s+<none>\s+<none>\s+mc-a\s`), c.ok(t, "get", "clusters", "-o", "wide"))

	require.Contains(t, c.fails(t, exitConflict, "delete", "managementcluster", "mc-a"), "HYPERFLEET-CNF-005")
	require.Equal(t, "managementcluster/mc-a patched\n", c.ok(t, "patch", "managementcluster", "mc-a", "--spec", `{"schedulable": false}`))
	require.Regexp(t, regexp.MustCompile(`(?m)^mc-a\s+local\s+false\s`), c.ok(t, "get", "mc", "mc-a"))
	c.ok(t, "delete", "managementcluster", "mc-b")
	require.Regexp(t, regexp.MustCompile(`(?m)^mc-b\s`), c.ok(t, "get", "mc", "--include-deleted"), "deleting, until the applier finalizes it")

	user := newCLI(t, s)
	user.env["HYPERFLEET_TOKEN"] = s.mint("alice", auth.RoleUser)
	require.Contains(t, user.fails(t, exitError, "create", "managementcluster", "mc-c", "--spec",
		`{"capacity": {"max_hosted_clusters": 1}, "credentials": {"kubeconfig": "mc-c"}}`), "platform")
}

// reportMessage posts an adapter's Available=True report with a message, as the applier reports capacity.
func (s *testAPI) reportMessage(tb testing.TB, plural string, id uuid.UUID, adapter string, generation int64, message string) {
	tb.Helper()
	available := cond(conditions.Available, conditions.True, "AsExpected")
	available.Message = &message
	s.report(tb, plural, id, adapter, generation, available)
}

// reportPlacement posts the placer's report that a cluster is placed on a management cluster.
func (s *testAPI) reportPlacement(tb testing.TB, cluster uuid.UUID, mc string) {
	tb.Helper()
	data := map[string]any{"management_cluster": mc, "region": "local"}
	available := cond(conditions.Available, conditions.True, "Placed")
	available.Message = &mc
	rep := api.AdapterStatusReport{Adapter: placer, ObservedGeneration: 1, ObservedTime: time.Now().UTC(), Data: &data,
		Conditions: []api.ReportedCondition{available, cond("Placed", conditions.True, "Placed")}}
	answer, err := api.ReadAnswer[api.AdapterStatus](s.client.ClientInterface.(*api.Client).PutResourceStatus(testContext(tb),
		api.Kinds().Cluster, api.ResourceRef{ID: cluster}, rep))
	require.NoError(tb, err)
	require.Contains(tb, []int{http.StatusOK, http.StatusCreated}, answer.StatusCode(), "body: %s", answer.Body)
}
