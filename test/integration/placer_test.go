package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/placement"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The placer's tests need no kube-apiserver: they post the applier's reports on management clusters (reachable or
// not) and on clusters (finalized or not) themselves, as the applier would.

// placerApplier is the applier the placer reads; the tests speak for it.
const placerApplier = placement.DefaultApplier

// startPlacerServer serves an API on which clusters wait for the placer (and for the applier, with applier) before
// they are removed.
func startPlacerServer(tb testing.TB, applier bool) *apiServer {
	tb.Helper()
	required := []string{placement.Name}
	if applier {
		required = append(required, placerApplier)
	}
	return startServerWith(tb, map[string][]string{"cluster": required})
}

// startPlacer runs a placer against s, tries every 100 ms, and returns a function that stops it (also called when
// the test ends).
func startPlacer(tb testing.TB, s *apiServer, tune ...func(*adapter.Config, *placement.Options)) (stop func()) {
	tb.Helper()
	cfg := runtimeConfig(tb, s, placement.Name)
	opts := placement.DefaultOptions()
	opts.RetryInterval, opts.FinalizeInterval = 100*time.Millisecond, 100*time.Millisecond
	for _, f := range tune {
		f(&cfg, &opts)
	}
	a, err := placement.New(cfg, opts, testLogger())
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(tb, <-done)
		})
	}
	tb.Cleanup(stop)
	return stop
}

// mcOptions shape a management cluster of a test.
type mcOptions struct {
	namespace string
	region    string
	labels    map[string]string
	vcpu      int
	reachable bool
}

// createMC registers a management cluster with room for maxClusters hosted clusters and credentials named after it;
// with o.reachable it also posts the applier's report that it is usable.
func createMC(tb testing.TB, s *apiServer, name string, maxClusters int, o mcOptions) *api.ManagementCluster {
	tb.Helper()
	spec := api.ManagementClusterSpec{Capacity: api.ManagementClusterCapacity{MaxHostedClusters: maxClusters},
		Credentials: api.ManagementClusterCredentials{Kubeconfig: name}}
	if o.namespace != "" {
		spec.Namespace = &o.namespace
	}
	if o.region != "" {
		spec.Region = &o.region
	}
	if o.vcpu > 0 {
		spec.Capacity.Vcpu = &o.vcpu
	}
	body := api.ManagementClusterCreate{Name: name, Spec: spec}
	if o.labels != nil {
		body.Labels = ptr(api.Labels(o.labels))
	}
	resp, err := s.CreateManagementClusterWithResponse(ctxFor(tb), nil, body)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	mc := resp.JSON201
	if o.reachable {
		reportMC(tb, s, mc, api.ReportedConditionStatusTrue, "Reachable")
	}
	return mc
}

// reportMC posts the applier's report on a management cluster at its generation: Available with reason.
func reportMC(tb testing.TB, s *apiServer, mc *api.ManagementCluster, status api.ReportedConditionStatus, reason string) {
	tb.Helper()
	resp, err := s.PutManagementClusterStatusWithResponse(ctxFor(tb), mc.Id, api.AdapterStatusReport{
		Adapter: placerApplier, ObservedGeneration: mc.Generation, ObservedTime: time.Now().UTC(),
		Conditions: []api.ReportedCondition{{Type: "Available", Status: status, Reason: ptr(reason),
			Message: ptr(fmt.Sprintf("0/%d hosted clusters", mc.Spec.Capacity.MaxHostedClusters))}},
	})
	require.NoError(tb, err)
	require.Less(tb, resp.StatusCode(), 300, "body: %s", resp.Body)
}

// patchMC merge-patches a management cluster's spec and returns it.
func patchMC(tb testing.TB, s *apiServer, mc *api.ManagementCluster, spec map[string]any) *api.ManagementCluster {
	tb.Helper()
	resp, err := s.PatchManagementClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctxFor(tb), mc.Id, nil, api.ResourcePatch{Spec: &spec})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

// createPlacedCluster creates a cluster with a placement (nil: none).
func createPlacedCluster(tb testing.TB, s *apiServer, name string, p *api.ClusterPlacement) *api.Cluster {
	tb.Helper()
	spec := clusterSpec(defaultStream)
	spec.Placement = p
	resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, api.ClusterCreate{Name: name, Spec: spec})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// placerReports returns the placer's report on every cluster that has one, by cluster name, deleting clusters
// included: one list request per 500 clusters.
func placerReports(tb testing.TB, s *apiServer) map[string]*api.AdapterStatus {
	tb.Helper()
	out := map[string]*api.AdapterStatus{}
	params := &api.ListClustersParams{Statuses: ptr(placement.Name), Size: ptr(500), Count: ptr(false), IncludeDeleted: ptr(true)}
	for {
		resp, err := s.ListClustersWithResponse(ctxFor(tb), params)
		require.NoError(tb, err)
		require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		for _, c := range resp.JSON200.Items {
			if c.AdapterStatuses == nil {
				continue
			}
			for i := range *c.AdapterStatuses {
				if st := (*c.AdapterStatuses)[i]; st.Adapter == placement.Name {
					out[c.Name] = &st
				}
			}
		}
		if resp.JSON200.Next == nil {
			return out
		}
		params.After = resp.JSON200.Next
	}
}

// placedOn returns the management cluster a placer report names, "" when it names none.
func placedOn(st *api.AdapterStatus) string {
	if st == nil || !conditionIs(st, placement.ConditionPlaced, api.ConditionStatusTrue, placement.ReasonPlaced) {
		return ""
	}
	mc, _ := st.Data[placement.DataManagementCluster].(string)
	return mc
}

// waitPlacements waits until every named cluster has a placer report that ok accepts, and returns the reports.
func waitPlacements(tb testing.TB, s *apiServer, what string, names []string, ok func(st *api.AdapterStatus) bool) map[string]*api.AdapterStatus {
	tb.Helper()
	var got map[string]*api.AdapterStatus
	waitWithin(tb, 60*time.Second, what, func() bool {
		got = placerReports(tb, s)
		for _, n := range names {
			if st := got[n]; st == nil || !ok(st) {
				return false
			}
		}
		return true
	})
	return got
}

func decided(st *api.AdapterStatus) bool {
	return placedOn(st) != "" || conditionIs(st, placement.ConditionPlaced, api.ConditionStatusFalse, placement.ReasonNoCapacity)
}

func isPlaced(st *api.AdapterStatus) bool { return placedOn(st) != "" }

// counts returns how many of the named clusters each management cluster has ("" for none).
func counts(reports map[string]*api.AdapterStatus, names []string) map[string]int {
	out := map[string]int{}
	for _, n := range names {
		out[placedOn(reports[n])]++
	}
	return out
}

// createClusters creates n clusters named prefix-00… at once and returns their names.
func createClusters(tb testing.TB, s *apiServer, prefix string, n int, p *api.ClusterPlacement) []string {
	tb.Helper()
	names := make([]string, n)
	var wg sync.WaitGroup
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
		wg.Go(func() { createPlacedCluster(tb, s, names[i], p) })
	}
	wg.Wait()
	return names
}

func TestPlacerSpreadsByCapacity(t *testing.T) {
	s := startPlacerServer(t, false)
	for i, capacity := range []int{1, 2, 3} {
		createMC(t, s, fmt.Sprintf("mc-%d", i+1), capacity, mcOptions{reachable: true})
	}
	startPlacer(t, s)

	names := createClusters(t, s, "spread", 6, nil)
	got := waitPlacements(t, s, "6 clusters placed", names, isPlaced)
	require.Equal(t, map[string]int{"mc-1": 1, "mc-2": 2, "mc-3": 3}, counts(got, names))

	st := got[names[0]]
	mc := placedOn(st)
	require.True(t, conditionIs(st, "Available", api.ConditionStatusTrue, placement.ReasonPlaced))
	require.Equal(t, mc, deref(condition(st, "Available").Message), "the CLI's MANAGEMENT CLUSTER column")
	require.Equal(t, "", st.Data[placement.DataRegion])

	// The cluster's aggregated conditions show the placement, which is what the CLI's column reads.
	resp, err := s.ListClustersWithResponse(ctxFor(t), &api.ListClustersParams{Search: ptr("name = '" + names[0] + "'")})
	require.NoError(t, err)
	require.Len(t, resp.JSON200.Items, 1)
	var column string
	for _, c := range resp.JSON200.Items[0].Status.Conditions {
		if c.Type == "ClusterPlacerAvailable" {
			column = deref(c.Message)
		}
	}
	require.Equal(t, mc, column)
}

// Thirty clusters created at once against twenty free slots: exactly twenty are placed, none past a budget, the
// other ten say why and are placed as soon as another management cluster is registered.
func TestPlacerNeverOvershoots(t *testing.T) {
	s := startPlacerServer(t, false)
	createMC(t, s, "mc-a", 5, mcOptions{reachable: true})
	createMC(t, s, "mc-b", 7, mcOptions{reachable: true})
	createMC(t, s, "mc-c", 100, mcOptions{reachable: true, vcpu: 40}) // 8 control planes of 5 vCPU
	startPlacer(t, s)

	names := createClusters(t, s, "burst", 30, nil)
	got := waitPlacements(t, s, "30 clusters decided", names, decided)
	require.Equal(t, map[string]int{"mc-a": 5, "mc-b": 7, "mc-c": 8, "": 10}, counts(got, names))
	for _, n := range names {
		if st := got[n]; placedOn(st) == "" {
			require.True(t, conditionIs(st, "Available", api.ConditionStatusFalse, placement.ReasonNoCapacity))
			require.Equal(t, "no management cluster fits: mc-a: full (5/5 hosted clusters); mc-b: full (7/7 hosted clusters); "+
				"mc-c: full (40/40 vCPU)", deref(condition(st, "Available").Message))
		}
	}

	createMC(t, s, "mc-d", 10, mcOptions{reachable: true})
	got = waitPlacements(t, s, "all 30 placed", names, isPlaced)
	require.Equal(t, map[string]int{"mc-a": 5, "mc-b": 7, "mc-c": 8, "mc-d": 10}, counts(got, names))
}

func TestPlacerCordon(t *testing.T) {
	s := startPlacerServer(t, false)
	a := createMC(t, s, "mc-a", 10, mcOptions{reachable: true})
	createMC(t, s, "mc-b", 10, mcOptions{reachable: true})
	startPlacer(t, s)

	createPlacedCluster(t, s, "first", nil)
	waitPlacements(t, s, "first on mc-a", []string{"first"}, func(st *api.AdapterStatus) bool { return placedOn(st) == "mc-a" })

	// Cordoned: no new placements on it; what it hosts stays.
	a = patchMC(t, s, a, map[string]any{"schedulable": false})
	names := createClusters(t, s, "cordon", 3, nil)
	got := waitPlacements(t, s, "placed beside the cordoned one", names, isPlaced)
	require.Equal(t, map[string]int{"mc-b": 3}, counts(got, names))
	require.Equal(t, "mc-a", placedOn(got["first"]))

	// Uncordoned, it takes clusters again, being the less used.
	patchMC(t, s, a, map[string]any{"schedulable": true})
	createPlacedCluster(t, s, "uncordoned", nil)
	got = waitPlacements(t, s, "placed on the uncordoned", []string{"uncordoned"}, isPlaced)
	require.Equal(t, "mc-a", placedOn(got["uncordoned"]), "mc-a is 1/10 used, mc-b 3/10")
}

func TestPlacerRegionAndSelector(t *testing.T) {
	s := startPlacerServer(t, false)
	createMC(t, s, "use-gold", 5, mcOptions{reachable: true, region: "us-east-1", labels: map[string]string{"tier": "gold"}})
	createMC(t, s, "use-silver", 5, mcOptions{reachable: true, region: "us-east-1", labels: map[string]string{"tier": "silver"}})
	createMC(t, s, "euw-gold", 5, mcOptions{reachable: true, region: "eu-west-1", labels: map[string]string{"tier": "gold"}})
	down := createMC(t, s, "aps-down", 5, mcOptions{region: "ap-south-1"})
	reportMC(t, s, down, api.ReportedConditionStatusFalse, "Unreachable")
	startPlacer(t, s)

	gold := &map[string]string{"tier": "gold"}
	tests := []struct {
		cluster string
		p       *api.ClusterPlacement
		want    string
	}{
		{"in-eu", &api.ClusterPlacement{Region: ptr("eu-west-1")}, "euw-gold"},
		{"silver", &api.ClusterPlacement{ManagementClusterSelector: &map[string]string{"tier": "silver"}}, "use-silver"},
		{"us-gold", &api.ClusterPlacement{Region: ptr("us-east-1"), ManagementClusterSelector: gold}, "use-gold"},
		{"in-ap", &api.ClusterPlacement{Region: ptr("ap-south-1")}, ""},
		{"bronze", &api.ClusterPlacement{ManagementClusterSelector: &map[string]string{"tier": "bronze"}}, ""},
	}
	var names []string
	for _, tt := range tests {
		createPlacedCluster(t, s, tt.cluster, tt.p)
		names = append(names, tt.cluster)
	}
	got := waitPlacements(t, s, "every cluster decided", names, decided)
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			require.Equal(t, tt.want, placedOn(got[tt.cluster]))
		})
	}
	require.Equal(t, "eu-west-1", got["in-eu"].Data[placement.DataRegion])
	require.Equal(t, "no management cluster fits: aps-down: not reachable (Unreachable); euw-gold: in region eu-west-1, not ap-south-1; "+
		"use-gold: in region us-east-1, not ap-south-1; use-silver: in region us-east-1, not ap-south-1",
		deref(condition(got["in-ap"], placement.ConditionPlaced).Message))
	require.Equal(t, "no management cluster fits: aps-down: labels do not match; euw-gold: labels do not match; "+
		"use-gold: labels do not match; use-silver: labels do not match",
		deref(condition(got["bronze"], placement.ConditionPlaced).Message))

	// Reachable again: the cluster waiting for its region is placed.
	reportMC(t, s, down, api.ReportedConditionStatusTrue, "Reachable")
	got = waitPlacements(t, s, "in-ap placed", []string{"in-ap"}, isPlaced)
	require.Equal(t, "aps-down", placedOn(got["in-ap"]))
	require.Equal(t, "ap-south-1", got["in-ap"].Data[placement.DataRegion])
}

// A restarted placer rebuilds its ledger from its reports: placements stay where they were (even on a cordoned
// management cluster), count against capacity, and clusters left unplaced are placed when capacity appears.
func TestPlacerRestartKeepsPlacements(t *testing.T) {
	s := startPlacerServer(t, false)
	a := createMC(t, s, "mc-a", 2, mcOptions{reachable: true})
	stop := startPlacer(t, s)
	names := createClusters(t, s, "before", 3, nil)
	before := waitPlacements(t, s, "decided before the restart", names, decided)
	require.Equal(t, map[string]int{"mc-a": 2, "": 1}, counts(before, names))
	stop()

	patchMC(t, s, a, map[string]any{"schedulable": false})
	createMC(t, s, "mc-b", 5, mcOptions{reachable: true})
	restarted := time.Now()
	// Resyncing every placed cluster makes the new placer report each one again.
	startPlacer(t, s, func(c *adapter.Config, _ *placement.Options) { c.ResyncAfter = 200 * time.Millisecond })
	after := waitPlacements(t, s, "every cluster reported again after the restart", names, func(st *api.AdapterStatus) bool {
		return isPlaced(st) && st.ObservedTime.After(restarted)
	})
	for _, n := range names {
		if mc := placedOn(before[n]); mc != "" {
			require.Equal(t, mc, placedOn(after[n]), "%s moved", n)
		} else {
			require.Equal(t, "mc-b", placedOn(after[n]), "the unplaced one")
		}
	}

	// mc-a's two slots still count: uncordoned, it has no room for another.
	patchMC(t, s, getMC(t, s, a.Id), map[string]any{"schedulable": true})
	more := createClusters(t, s, "after", 2, nil)
	got := waitPlacements(t, s, "placed after the restart", more, isPlaced)
	require.Equal(t, map[string]int{"mc-b": 2}, counts(got, more))
}

// Unplaced clusters have a report at their generation, so the API does not list them as pending: a restarted placer
// wakes them itself.
func TestPlacerRestartWakesUnplacedClusters(t *testing.T) {
	s := startPlacerServer(t, false)
	createMC(t, s, "mc-a", 1, mcOptions{reachable: true})
	stop := startPlacer(t, s)
	names := createClusters(t, s, "wake", 2, nil)
	require.Equal(t, map[string]int{"mc-a": 1, "": 1}, counts(waitPlacements(t, s, "decided", names, decided), names))
	stop()

	createMC(t, s, "mc-b", 1, mcOptions{reachable: true})
	startPlacer(t, s) // no resync: only the wake brings the unplaced cluster back
	got := waitPlacements(t, s, "both placed", names, isPlaced)
	require.Equal(t, map[string]int{"mc-a": 1, "mc-b": 1}, counts(got, names))
}

// A deleted cluster keeps its slot until the applier has finalized it; then the slot goes to the next cluster.
func TestPlacerFreesTheSlotOnlyAfterTheApplierFinalized(t *testing.T) {
	s := startPlacerServer(t, true)
	mc := createMC(t, s, "mc-a", 1, mcOptions{reachable: true})
	// Every re-check posts, even a report that says what the last said, so that "tried again" shows in its
	// observed time below.
	startPlacer(t, s, func(c *adapter.Config, _ *placement.Options) { c.ReportHeartbeat = 0 })

	first := createPlacedCluster(t, s, "first", nil)
	waitPlacements(t, s, "first placed", []string{"first"}, isPlaced)
	reportCluster(t, s, first.Id, 1, false) // the applier has applied it
	createPlacedCluster(t, s, "second", nil)
	waitPlacements(t, s, "second waits", []string{"second"}, decided)

	resp, err := s.DeleteClusterWithResponse(ctxFor(t), first.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode(), "body: %s", resp.Body)
	got := waitPlacements(t, s, "first keeps its slot", []string{"first"}, func(st *api.AdapterStatus) bool {
		return conditionIs(st, "Available", api.ConditionStatusFalse, placement.ReasonWaitingForHostedClusterRemoval)
	})
	waiting := got["first"].ObservedTime
	require.Equal(t, "mc-a", got["first"].Data[placement.DataManagementCluster], "the applier still finds it")
	// The API refuses to delete a management cluster a cluster is placed on, deleting ones included.
	del, err := s.DeleteManagementClusterWithResponse(ctxFor(t), mc.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, del.StatusCode(), "body: %s", del.Body)

	// Tried again since, and still waiting: the slot is held.
	got = waitPlacements(t, s, "second tried again", []string{"second"}, func(st *api.AdapterStatus) bool {
		return st.ObservedTime.After(waiting)
	})
	require.Equal(t, "", placedOn(got["second"]))
	require.Contains(t, deref(condition(got["second"], "Available").Message), "mc-a: full (1/1 hosted clusters)")

	// The applier has removed the HostedCluster: the slot is free, the cluster goes, the second takes its place.
	reportCluster(t, s, first.Id, clusterGeneration(t, s, first.Id), true)
	got = waitPlacements(t, s, "second placed", []string{"second"}, isPlaced)
	require.Equal(t, "mc-a", placedOn(got["second"]))
	eventually(t, "first removed", func() bool {
		r, err := s.GetClusterWithResponse(ctxFor(t), first.Id)
		require.NoError(t, err)
		return r.StatusCode() == http.StatusNotFound
	})
}

// A cluster removed without its finalizers (an admin's force-delete) leaves its slot in the ledger until the prune
// finds it gone; then the slot is free again.
func TestPlacerPrunesForceDeletedClusters(t *testing.T) {
	s := startPlacerServer(t, true)
	createMC(t, s, "mc-a", 1, mcOptions{reachable: true})
	startPlacer(t, s, func(_ *adapter.Config, o *placement.Options) { o.PruneInterval = 200 * time.Millisecond })

	stuck := createPlacedCluster(t, s, "stuck", nil)
	waitPlacements(t, s, "stuck placed", []string{"stuck"}, isPlaced)
	createPlacedCluster(t, s, "next", nil)
	waitPlacements(t, s, "next waits", []string{"next"}, decided)

	resp, err := s.ForceDeleteClusterWithResponse(ctxFor(t), stuck.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode(), "body: %s", resp.Body)
	got := waitPlacements(t, s, "next placed once the prune freed the slot", []string{"next"}, isPlaced)
	require.Equal(t, "mc-a", placedOn(got["next"]))
}

// reportCluster posts the applier's report on a cluster at generation: applied, or (finalized) removed.
func reportCluster(tb testing.TB, s *apiServer, id uuid.UUID, generation int64, finalized bool) {
	tb.Helper()
	conds := []api.ReportedCondition{{Type: "Available", Status: api.ReportedConditionStatusTrue, Reason: ptr("AsExpected")}}
	if finalized {
		conds = []api.ReportedCondition{{Type: "Available", Status: api.ReportedConditionStatusFalse, Reason: ptr("Deleted")},
			{Type: "Finalized", Status: api.ReportedConditionStatusTrue, Reason: ptr("Finalized")}}
	}
	resp, err := s.PutClusterStatusWithResponse(ctxFor(tb), id, api.AdapterStatusReport{Adapter: placerApplier,
		ObservedGeneration: generation, ObservedTime: time.Now().UTC(), Conditions: conds})
	require.NoError(tb, err)
	require.Less(tb, resp.StatusCode(), 300, "body: %s", resp.Body)
}

func clusterGeneration(tb testing.TB, s *apiServer, id uuid.UUID) int64 {
	tb.Helper()
	resp, err := s.GetClusterWithResponse(ctxFor(tb), id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200.Generation
}

func getMC(tb testing.TB, s *apiServer, id uuid.UUID) *api.ManagementCluster {
	tb.Helper()
	resp, err := s.GetManagementClusterWithResponse(ctxFor(tb), id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

// The placer refuses to run as more than one shard: two deciders could both take the last slot.
func TestPlacerRefusesShards(t *testing.T) {
	s := startPlacerServer(t, false)
	cfg := runtimeConfig(t, s, placement.Name)
	cfg.ShardCount, cfg.ShardIndex = 2, 1
	_, err := placement.New(cfg, placement.DefaultOptions(), testLogger())
	require.ErrorContains(t, err, "--shard-count 2")
}
