package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
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
	// Per adapter, the highest generation sent and the observed times of the reports at it: the stored report is
	// one of those. Which one is the server's order of arrival (the last received wins at one generation), which
	// the senders cannot know; the adapters' clocks (observed_time) do not decide it.
	newest := map[string]int64{}
	atNewest := map[string][]time.Time{}
	for _, a := range adapters {
		for i := range 10 {
			status := []string{"True", "False"}[rng.IntN(2)]
			rep := report(a, int64(1+rng.IntN(3)), base.Add(time.Duration(rng.IntN(100000))*time.Millisecond+time.Duration(i)*time.Microsecond), available(status))
			reports = append(reports, &sent{rep: rep})
			switch {
			case rep.ObservedGeneration > newest[a]:
				newest[a], atNewest[a] = rep.ObservedGeneration, []time.Time{rep.ObservedTime}
			case rep.ObservedGeneration == newest[a]:
				atNewest[a] = append(atNewest[a], rep.ObservedTime)
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
		require.Equal(t, newest[st.Adapter], st.ObservedGeneration, st.Adapter)
		require.True(t, slices.ContainsFunc(atNewest[st.Adapter], st.ObservedTime.Equal),
			"%s: stored %s, not one of the reports at generation %d", st.Adapter, st.ObservedTime, newest[st.Adapter])
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

// Required adapters are the database's: only migrate sets them (serve refuses a database where they were never
// set, with or without the flag, and writes nothing), a replica started with others refuses to start rather than
// flip aggregates, migrate changes them, serving replicas notice, drain and exit, and a replica started again
// re-aggregates for the new set, logging each deleting resource it removes as a result.
func TestRequiredAdaptersAreTheDatabases(t *testing.T) {
	dsn := harness.NewDatabase(t)
	seedStream(t, dsn, defaultStream)
	clusterApplier := map[string][]string{"cluster": {"applier"}}
	clusterApplierDNS := map[string][]string{"cluster": {"applier", "dns"}}

	for _, required := range []map[string][]string{nil, clusterApplier} {
		_, err := server.New(ctxFor(t), replicaConfig(dsn, required), slog.New(slog.NewJSONHandler(io.Discard, nil)))
		require.ErrorIs(t, err, server.ErrRequiredAdaptersUnset)
		require.ErrorContains(t, err, "hyperfleet-api migrate --required-adapters")
	}
	stored, err := postgres.LoadRequiredAdapters(ctxFor(t), harness.OpenGorm(t, dsn))
	require.NoError(t, err)
	require.Nil(t, stored, "serve wrote the required adapters")
	require.NoError(t, server.RunMigrations(ctxFor(t), replicaConfig(dsn, clusterApplier), slog.New(slog.NewJSONHandler(io.Discard, nil))))

	first := runReplica(t, dsn, clusterApplier)
	c := createCluster(t, first.api, "reconfigured", nil)
	postClusterStatus(t, first.api, c, report("applier", 1, time.Now().UTC(), available("True")), http.StatusCreated)
	require.Equal(t, api.ResourceStatusPhaseReady, getCluster(t, first.api, c).Status.Phase)

	// A replica that disagrees does not start: it would flip every aggregate back and forth with the first.
	_, err = server.New(ctxFor(t), replicaConfig(dsn, clusterApplierDNS), slog.New(slog.NewJSONHandler(io.Discard, nil)))
	require.ErrorIs(t, err, server.ErrRequiredAdapters)
	require.ErrorContains(t, err, "cluster=applier,dns")
	require.ErrorContains(t, err, "the database requires cluster=applier")

	// migrate changes them; the serving replica notices, drains and exits, to be restarted on them.
	var migrateLog bytes.Buffer
	require.NoError(t, server.RunMigrations(ctxFor(t), replicaConfig(dsn, clusterApplierDNS), slog.New(slog.NewJSONHandler(&migrateLog, nil))))
	require.Contains(t, migrateLog.String(), `"before":"cluster=applier","after":"cluster=applier,dns"`)
	require.ErrorIs(t, first.wait(t), server.ErrRequiredAdapters)

	// Started without the flag, a replica serves the database's, re-aggregating the fleet for them.
	second := runReplica(t, dsn, nil)
	got := getCluster(t, second.api, c)
	require.Equal(t, api.ResourceStatusPhaseProgressing, got.Status.Phase)
	require.Equal(t, "AdaptersMissing", deref(conditionOf(t, got, "Ready").Reason))
	require.Equal(t, []string{"reconfigured"}, pendingNames(t, second.api, "dns", ""))

	// Deleted and finalized by the applier, the cluster waits for dns...
	deleted, err := second.api.DeleteClusterWithResponse(ctxFor(t), c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, deleted.StatusCode(), "body: %s", deleted.Body)
	postClusterStatus(t, second.api, c, report("applier", 2, time.Now().UTC(), available("False"), cond("Finalized", "True", "")), http.StatusOK)
	require.Equal(t, api.ResourceStatusPhaseDeleting, getCluster(t, second.api, c).Status.Phase)

	// ...until dns is no longer required: then it goes when a replica starts on the new set, and the log says so.
	require.NoError(t, server.RunMigrations(ctxFor(t), replicaConfig(dsn, clusterApplier), slog.New(slog.NewJSONHandler(io.Discard, nil))))
	require.ErrorIs(t, second.wait(t), server.ErrRequiredAdapters)
	third := runReplica(t, dsn, clusterApplier)
	gone, err := third.api.GetClusterWithResponse(ctxFor(t), c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, gone.StatusCode())
	var removal struct {
		Msg, Kind, ID, Name string
	}
	for _, line := range strings.Split(third.log.String(), "\n") {
		if strings.Contains(line, "removed a deleting resource") {
			require.NoError(t, json.Unmarshal([]byte(line), &removal))
		}
	}
	require.Equal(t, "Cluster", removal.Kind, "log: %s", third.log.String())
	require.Equal(t, c.Id.String(), removal.ID)
	require.Equal(t, "reconfigured", removal.Name)
	require.NoError(t, third.stop(t))
}

// replica is a hyperfleet-api run by a test that wants to see how it stops.
type replica struct {
	api  *apiServer
	log  *logbuf.Buffer
	done chan error
	stop func(t *testing.T) error
}

func replicaConfig(dsn string, required map[string][]string) server.Config {
	return server.Config{
		Env: server.EnvIntegrationTesting, APIBindAddress: "127.0.0.1:0", HealthBindAddress: "127.0.0.1:0", MetricsBindAddress: "127.0.0.1:0",
		HTTPReadTimeout: 10 * time.Second, HTTPWriteTimeout: 10 * time.Second, HTTPIdleTimeout: time.Minute,
		ShutdownTimeout: 5 * time.Second, MaxBodyBytes: 256 << 10, DB: server.DBConfig{URL: dsn, SSLMode: "disable", MaxOpenConns: 10},
		RequiredAdapters: required, RequiredAdaptersCheck: 50 * time.Millisecond, Version: "test", Build: "test",
	}
}

// runReplica starts a replica on dsn, given required adapters or (nil) the database's.
func runReplica(t *testing.T, dsn string, required map[string][]string) *replica {
	t.Helper()
	logs := &logbuf.Buffer{}
	srv, err := server.New(ctxFor(t), replicaConfig(dsn, required), slog.New(slog.NewJSONHandler(logs, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{log: logs, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	stopped := false
	r.stop = func(t *testing.T) error {
		t.Helper()
		cancel()
		if stopped {
			return nil
		}
		stopped = true
		select {
		case err := <-r.done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the replica did not stop")
			return nil
		}
	}
	t.Cleanup(func() { _ = r.stop(t) })
	client, err := api.NewClientWithResponses("http://" + srv.APIAddr())
	require.NoError(t, err)
	r.api = &apiServer{ClientWithResponses: client, http: http.DefaultClient, base: "http://" + srv.APIAddr(), dsn: dsn}
	return r
}

// wait returns how the replica stopped by itself.
func (r *replica) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for stop
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the replica did not stop by itself")
		return nil
	}
}
