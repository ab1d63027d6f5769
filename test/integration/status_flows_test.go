package integration

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/resource"
	"github.com/hyperfleet/hyperfleet/pkg/server"
)

func TestConcurrentReportsNeverLetAStaleOneWin(t *testing.T) {
	adapters := []string{"a1", "a2", "a3", "a4", "a5"}
	s := startServerWith(t, map[string][]string{"cluster": {"a1", "a2", "a3", "a4"}}) // a5 reports, unrequired
	ctx := ctxFor(t)
	c := createCluster(t, s, "contested", nil)
	for _, key := range []string{"ssh-ed25519 B", "ssh-ed25519 C"} {
		p, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
			api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"ssh_public_key": key}}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, p.StatusCode())
	}
	// 50 reports, 10 per adapter, at generations 1–3 with distinct times, sent all at once.
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Microsecond)
	type sent struct {
		rep  api.AdapterStatusReport
		code int
	}
	var reports []*sent
	newest := map[string]api.AdapterStatusReport{}
	for _, a := range adapters {
		for i := range 10 {
			status := []string{"True", "False"}[rng.IntN(2)]
			rep := report(a, int64(1+rng.IntN(3)), base.Add(time.Duration(rng.IntN(100000))*time.Millisecond+time.Duration(i)*time.Microsecond), available(status))
			reports = append(reports, &sent{rep: rep})
			if n, ok := newest[a]; !ok || rep.ObservedGeneration > n.ObservedGeneration ||
				(rep.ObservedGeneration == n.ObservedGeneration && rep.ObservedTime.After(n.ObservedTime)) {
				newest[a] = rep
			}
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, r := range reports {
		wg.Go(func() {
			<-start
			resp, err := s.PostClusterStatusWithResponse(ctx, c.Id, r.rep)
			if err == nil {
				r.code = resp.StatusCode()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, r := range reports {
		require.Contains(t, []int{http.StatusCreated, http.StatusOK, http.StatusConflict}, r.code, "%+v", r.rep)
	}

	list, err := s.ListClusterStatusesWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Len(t, list.JSON200.Items, len(adapters))
	var stored []resource.AdapterStatus
	for _, st := range list.JSON200.Items {
		want := newest[st.Adapter]
		require.Equal(t, want.ObservedGeneration, st.ObservedGeneration, st.Adapter)
		require.True(t, want.ObservedTime.Equal(st.ObservedTime), "%s: stored %s, newest sent %s", st.Adapter, st.ObservedTime, want.ObservedTime)
		conds := make([]conditions.Condition, len(st.Conditions))
		for i, x := range st.Conditions {
			conds[i] = conditions.Condition{Type: x.Type, Status: conditions.Status(x.Status)}
		}
		stored = append(stored, resource.AdapterStatus{Adapter: st.Adapter, ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Conditions: conds})
	}

	// The stored aggregate is the pure function of the stored reports.
	got := getCluster(t, s, c)
	d := &resource.Descriptor{Kind: "Cluster", RequiredAdapters: []string{"a1", "a2", "a3", "a4"}}
	want, _ := resource.Aggregate(d, &resource.Resource{Generation: got.Generation}, stored, time.Now())
	require.Equal(t, string(want.Phase), string(got.Status.Phase))
	require.Len(t, got.Status.Conditions, len(want.Conditions))
	for i, w := range want.Conditions {
		g := got.Status.Conditions[i]
		require.Equal(t, w.Type, g.Type)
		require.Equal(t, string(w.Status), string(g.Status), w.Type)
		require.Equal(t, w.Reason, deref(g.Reason), w.Type)
		require.Equal(t, w.Message, deref(g.Message), w.Type)
		require.Equal(t, w.ObservedGeneration, deref(g.ObservedGeneration), w.Type)
	}
}

func TestDeletionWaitsForAdaptersAndChildren(t *testing.T) {
	s := startServer(t) // clusters and node pools require "applier"
	ctx := ctxFor(t)
	c := createCluster(t, s, "finalized", nil)
	pools := []*api.NodePool{createNodePool(t, s, c, "pool-a", 1), createNodePool(t, s, c, "pool-b", 1)}
	at := time.Now().UTC().Add(-time.Minute)

	del, err := s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	require.Equal(t, []string{"finalized"}, pendingNames(t, s, "applier", ""), "deleting means work for the adapter")

	// Finalized at an older generation does not count; at the current one it does, but children remain.
	postClusterStatus(t, s, c, report("applier", 1, at, available("False"), cond("Finalized", "True", "")), http.StatusCreated)
	require.NotNil(t, getCluster(t, s, c).DeletedTime)
	postClusterStatus(t, s, c, report("applier", 2, at.Add(time.Second), available("False"), cond("Finalized", "True", "")), http.StatusOK)
	require.NotNil(t, getCluster(t, s, c).DeletedTime, "the cluster waits for its node pools")
	require.Empty(t, pendingNames(t, s, "applier", ""), "the cluster is finalized as far as the adapter goes")

	postNodePoolStatus(t, s, pools[0], report("applier", 2, at, available("False"), cond("Finalized", "True", "")), http.StatusCreated)
	gone, err := s.GetNodePoolWithResponse(ctx, c.Id, pools[0].Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, gone.StatusCode())
	require.NotNil(t, getCluster(t, s, c).DeletedTime)

	// The last node pool to finalize completes its cluster's delete in the same transaction.
	postNodePoolStatus(t, s, pools[1], report("applier", 2, at, available("False"), cond("Finalized", "False", "")), http.StatusCreated)
	postNodePoolStatus(t, s, pools[1], report("applier", 2, at.Add(time.Second), available("False"), cond("Finalized", "True", "")), http.StatusOK)
	for _, get := range []func() (int, error){
		func() (int, error) { r, err := s.GetClusterWithResponse(ctx, c.Id); return r.StatusCode(), err },
		func() (int, error) {
			r, err := s.GetNodePoolWithResponse(ctx, c.Id, pools[1].Id)
			return r.StatusCode(), err
		},
	} {
		code, err := get()
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, code)
	}
	// The name is free, and nothing of the old cluster's reports leaks into the new one.
	again := createCluster(t, s, "finalized", nil)
	list, err := s.ListClusterStatusesWithResponse(ctx, again.Id)
	require.NoError(t, err)
	require.Empty(t, list.JSON200.Items)
}

func TestForceDeleteRemovesTheSubtreeAtOnce(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "stuck", nil)
	np := createNodePool(t, s, c, "pool", 1)
	postClusterStatus(t, s, c, report("applier", 1, time.Now().UTC(), available("True")), http.StatusCreated)
	resp, err := s.ForceDeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode(), "body: %s", resp.Body)
	for _, get := range []func() (int, error){
		func() (int, error) { r, err := s.GetClusterWithResponse(ctx, c.Id); return r.StatusCode(), err },
		func() (int, error) { r, err := s.GetNodePoolWithResponse(ctx, c.Id, np.Id); return r.StatusCode(), err },
		func() (int, error) {
			r, err := s.ListClusterStatusesWithResponse(ctx, c.Id)
			return r.StatusCode(), err
		},
		func() (int, error) { r, err := s.ForceDeleteClusterWithResponse(ctx, c.Id); return r.StatusCode(), err },
	} {
		code, err := get()
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, code)
	}
	db := harnessDB(t, s)
	var orphans int64
	require.NoError(t, db.Raw("SELECT count(*) FROM adapter_statuses").Scan(&orphans).Error)
	require.Zero(t, orphans, "no report outlives its resource")
}

func TestPendingForFindsExactlyTheWork(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	fleet := map[string]*api.Cluster{}
	for _, n := range []string{"p-a", "p-b", "p-c", "p-d"} {
		fleet[n] = createCluster(t, s, n, nil)
	}
	require.Equal(t, []string{"p-a", "p-b", "p-c", "p-d"}, pendingNames(t, s, "applier", ""), "never reported")
	at := time.Now().UTC().Add(-time.Minute)
	for _, n := range []string{"p-a", "p-b", "p-c"} {
		postClusterStatus(t, s, fleet[n], report("applier", 1, at, available("True")), http.StatusCreated)
	}
	require.Equal(t, []string{"p-d"}, pendingNames(t, s, "applier", ""))

	p, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, fleet["p-b"].Id, nil,
		api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, p.StatusCode())
	_, err = s.DeleteClusterWithResponse(ctx, fleet["p-c"].Id)
	require.NoError(t, err)
	require.Equal(t, []string{"p-b", "p-c", "p-d"}, pendingNames(t, s, "applier", ""), "new generation, deleting, never reported")

	// resync_after also returns what was last reported longer ago than that.
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, []string{"p-a", "p-b", "p-c", "p-d"}, pendingNames(t, s, "applier", "10ms"))
	require.Equal(t, []string{"p-b", "p-c", "p-d"}, pendingNames(t, s, "applier", "1h"))

	// An adapter nobody requires has work on every resource it has not reported on.
	postClusterStatus(t, s, fleet["p-a"], report("observer", 1, at, available("True")), http.StatusCreated)
	require.Equal(t, []string{"p-b", "p-c", "p-d"}, pendingNames(t, s, "observer", ""))

	for _, bad := range []struct{ pending, resync string }{{"Bad_Name", ""}, {"applier", "soon"}, {"", "5m"}} {
		params := &api.ListClustersParams{}
		if bad.pending != "" {
			params.PendingFor = &bad.pending
		}
		if bad.resync != "" {
			params.ResyncAfter = &bad.resync
		}
		resp, err := s.ListClustersWithResponse(ctx, params)
		require.NoError(t, err)
		problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-004")
	}
}

func TestChangingRequiredAdaptersReaggregatesAtStart(t *testing.T) {
	first := startServerWith(t, map[string][]string{"cluster": {"applier"}})
	c := createCluster(t, first, "reconfigured", nil)
	postClusterStatus(t, first, c, report("applier", 1, time.Now().UTC(), available("True")), http.StatusCreated)
	require.Equal(t, api.ResourceStatusPhaseReady, getCluster(t, first, c).Status.Phase)

	// The API is stateless: a second replica with another configuration re-aggregates the fleet as it starts.
	second := startServerOn(t, first.dsn, server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier", "dns"}}})
	got := getCluster(t, second, c)
	require.Equal(t, api.ResourceStatusPhaseProgressing, got.Status.Phase)
	require.Equal(t, "AdaptersMissing", deref(conditionOf(t, got, "Ready").Reason))
	require.Equal(t, []string{"reconfigured"}, pendingNames(t, second, "dns", ""))

	third := startServerOn(t, first.dsn, server.Config{})
	got = getCluster(t, third, c)
	require.Equal(t, api.ResourceStatusPhaseReady, got.Status.Phase)
	require.Empty(t, got.Status.Conditions)
}
