package integration

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// scriptedReconciler answers each call with the next step of its script (the last step repeats), and counts
// its calls per generation.
type scriptedReconciler struct {
	mu       sync.Mutex
	steps    []func(obj *adapter.Object) (adapter.Outcome, error)
	calls    map[int64]int
	finalize func(obj *adapter.Object) (adapter.Outcome, error)
}

func script(steps ...func(obj *adapter.Object) (adapter.Outcome, error)) *scriptedReconciler {
	return &scriptedReconciler{steps: steps, calls: map[int64]int{}}
}

func (s *scriptedReconciler) Reconcile(_ context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	s.mu.Lock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	s.calls[obj.Generation]++
	step := s.steps[min(n, len(s.steps)-1)]
	s.mu.Unlock()
	return step(obj)
}

func (s *scriptedReconciler) Finalize(_ context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	if s.finalize == nil {
		return adapter.Outcome{Finalized: true}, nil
	}
	return s.finalize(obj)
}

func (s *scriptedReconciler) callsAt(generation int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[generation]
}

func ok(*adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Available: conditions.Reported{Status: conditions.True, Reason: "Fine"}, Data: map[string]any{"n": 1}}, nil
}

const testAdapter = "test-adapter"

// startRuntime runs the runtime with rec over VersionStreams (which need only the API) and returns it.
func startRuntime(tb testing.TB, s *apiServer, rec adapter.Reconciler, tune ...func(*adapter.Config)) *adapter.Runner {
	tb.Helper()
	return startControllers(tb, s, []adapter.Controller{{Kind: adapter.VersionStreams(), Reconciler: rec}}, tune...)
}

// startControllers runs the runtime as the test adapter with the given controllers and returns it.
func startControllers(tb testing.TB, s *apiServer, controllers []adapter.Controller, tune ...func(*adapter.Config)) *adapter.Runner {
	tb.Helper()
	cfg := runtimeConfig(tb, s, testAdapter)
	for _, f := range tune {
		f(&cfg)
	}
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, func(ctx context.Context) error { return runner.Run(ctx, controllers...) })
	return runner
}

// adapterReport returns the test adapter's report about a stream, or nil.
func adapterReport(tb testing.TB, s *apiServer, stream api.VersionStream, name string) *api.AdapterStatus {
	tb.Helper()
	resp, err := s.ListVersionStreamStatusesWithResponse(ctxFor(tb), stream.Id)
	require.NoError(tb, err)
	if resp.StatusCode() == http.StatusNotFound {
		return nil
	}
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	for _, st := range resp.JSON200.Items {
		if st.Adapter == name && st.ObservedGeneration > 0 {
			return &st
		}
	}
	return nil
}

func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	waitWithin(tb, 20*time.Second, what, cond)
}

// waitWithin waits up to d for cond, polling every 25 ms.
func waitWithin(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func conditionIs(st *api.AdapterStatus, typ string, status api.ConditionStatus, reason string) bool {
	if st == nil {
		return false
	}
	c := condition(st, typ)
	return c != nil && c.Status == status && deref(c.Reason) == reason
}

func TestRuntimeAlwaysReportsAndRetries(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := streamNamed(t, s, defaultStream)
	rec := script(
		func(*adapter.Object) (adapter.Outcome, error) { panic("boom") },
		func(*adapter.Object) (adapter.Outcome, error) {
			return adapter.Outcome{}, adapter.Transient("BackendDown", errors.New("backend said 503"))
		},
		ok,
	)
	startRuntime(t, s, rec)

	// The panic and the error are each reported, then the retry succeeds.
	var seen []string
	eventually(t, "a healthy report after a panic and an error", func() bool {
		st := adapterReport(t, s, stream, testAdapter)
		if st == nil {
			return false
		}
		if h := condition(st, conditions.Health); h != nil && (len(seen) == 0 || seen[len(seen)-1] != deref(h.Reason)) {
			seen = append(seen, deref(h.Reason))
		}
		return conditionIs(st, conditions.Health, api.ConditionStatusTrue, conditions.ReasonReconciled)
	})
	require.GreaterOrEqual(t, rec.callsAt(1), 3, "panic, error, success")
	st := adapterReport(t, s, stream, testAdapter)
	require.Equal(t, api.ConditionStatusTrue, condition(st, conditions.Available).Status)
	require.Equal(t, api.ConditionStatusTrue, condition(st, conditions.Applied).Status)
	require.EqualValues(t, 1, st.Data["n"])
	require.Equal(t, "test-adapter", st.Adapter)
	require.Equal(t, api.ResourceStatusPhaseReady, getStream(t, s, stream).Status.Phase)
	t.Logf("Health reasons seen: %v", seen) // polling may miss short-lived reports; the call count proves them
}

func TestRuntimeWaitsForANewGenerationAfterATerminalError(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := streamNamed(t, s, defaultStream)
	rec := script(func(obj *adapter.Object) (adapter.Outcome, error) {
		if obj.Generation == 1 {
			return adapter.Outcome{}, adapter.Terminalf("InvalidSpec", "generation %d cannot work", obj.Generation)
		}
		return ok(obj)
	})
	startRuntime(t, s, rec)
	eventually(t, "the terminal error's report", func() bool {
		return conditionIs(adapterReport(t, s, stream, testAdapter), conditions.Health, api.ConditionStatusFalse, "InvalidSpec")
	})
	st := adapterReport(t, s, stream, testAdapter)
	require.Equal(t, api.ConditionStatusFalse, condition(st, conditions.Available).Status)
	require.Contains(t, deref(condition(st, conditions.Health).Message), "generation 1 cannot work")
	require.Equal(t, api.ResourceStatusPhaseDegraded, getStream(t, s, stream).Status.Phase)

	time.Sleep(500 * time.Millisecond) // five polls
	require.Equal(t, 1, rec.callsAt(1), "a terminal error is not retried")

	patch, err := s.PatchVersionStreamWithBodyWithResponse(ctxFor(t), stream.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec":{"target_version":"4.17"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode())
	eventually(t, "the new generation reconciled", func() bool {
		st := adapterReport(t, s, stream, testAdapter)
		return st != nil && st.ObservedGeneration == 2 && conditionIs(st, conditions.Health, api.ConditionStatusTrue, conditions.ReasonReconciled)
	})
	require.Equal(t, api.ResourceStatusPhaseReady, getStream(t, s, stream).Status.Phase)
}

func TestRuntimeFinalizesDeletedResources(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := createStream(t, s, "doomed", api.VersionStreamSpec{TargetVersion: "4.16"})
	release := make(chan struct{})
	rec := script(ok)
	rec.finalize = func(*adapter.Object) (adapter.Outcome, error) {
		select {
		case <-release:
			return adapter.Outcome{Finalized: true}, nil
		default:
			return adapter.Outcome{RequeueAfter: 50 * time.Millisecond}, nil // still cleaning up
		}
	}
	startRuntime(t, s, rec)
	eventually(t, "the first report", func() bool { return adapterReport(t, s, *stream, testAdapter) != nil })

	del, err := s.DeleteVersionStreamWithResponse(ctxFor(t), stream.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	eventually(t, "a Finalized=False report", func() bool {
		st := adapterReport(t, s, *stream, testAdapter)
		return st != nil && st.ObservedGeneration == 2 && conditionIs(st, conditions.Finalized, api.ConditionStatusFalse, conditions.ReasonFinalizing)
	})
	close(release)
	eventually(t, "the stream removed", func() bool {
		resp, err := s.GetVersionStreamWithResponse(ctxFor(t), stream.Id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
}

// A replica that reports an old generation after another reported the new one is answered 409: it drops the
// report quietly and does not retry it.
func TestRuntimeDropsStaleReports(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := streamNamed(t, s, defaultStream)
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := script(func(obj *adapter.Object) (adapter.Outcome, error) {
		if obj.Generation == 1 {
			once.Do(func() { close(holding) })
			<-release
		}
		return ok(obj)
	})
	// The slow replica polls once, at start (no watch): a later poll or an event would bring generation 2, which it
	// would rightly reconcile too.
	slowRunner := startRuntime(t, s, slow, func(c *adapter.Config) { c.Replica, c.PollInterval, c.Source = "slow", time.Hour, adapter.SourcePoll })
	<-holding

	patch, err := s.PatchVersionStreamWithBodyWithResponse(ctxFor(t), stream.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec":{"channel_group":"candidate"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode())
	startRuntime(t, s, script(ok), func(c *adapter.Config) { c.Replica = "fast" })
	eventually(t, "the fast replica's report at generation 2", func() bool {
		st := adapterReport(t, s, stream, testAdapter)
		return st != nil && st.ObservedGeneration == 2
	})

	close(release)
	eventually(t, "the slow replica's stale report dropped", func() bool {
		return strings.Contains(scrape(t, "http://"+slowRunner.OpsAddr()+"/metrics"), `result="stale"} 1`)
	})
	st := adapterReport(t, s, stream, testAdapter)
	require.Equal(t, int64(2), st.ObservedGeneration)
	require.Equal(t, "fast", st.Metadata["replica"])
}

// SIGTERM (here: the context's end) stops polling at once but lets the reconcile in flight finish and report.
func TestRuntimeDrainsInFlightWorkOnShutdown(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := streamNamed(t, s, defaultStream)
	holding, release := make(chan struct{}), make(chan struct{})
	rec := script(func(obj *adapter.Object) (adapter.Outcome, error) {
		close(holding)
		<-release
		return ok(obj)
	})
	cfg := runtimeConfig(t, s, testAdapter)
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx, adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: rec}) }()
	ops := "http://" + runner.OpsAddr()
	<-holding
	require.Equal(t, http.StatusOK, get(t, ops+"/readyz"))
	require.Equal(t, http.StatusOK, get(t, ops+"/healthz"))

	cancel()
	eventually(t, "readyz to say draining", func() bool { return get(t, ops+"/readyz") == http.StatusServiceUnavailable })
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while a reconcile was in flight", err)
	default:
	}
	close(release)
	require.NoError(t, <-done)
	st := adapterReport(t, s, stream, testAdapter)
	require.NotNil(t, st, "the in-flight reconcile reported before exit")
	require.True(t, conditionIs(st, conditions.Health, api.ConditionStatusTrue, conditions.ReasonReconciled))
}

// The runtime reads its bearer token from a file and reads it again when it changes, as Kubernetes rotates
// projected service-account tokens.
func TestRuntimeRereadsItsTokenFile(t *testing.T) {
	s, mint := startSecuredServer(t, func(c *server.Config) {
		c.RequiredAdapters = map[string][]string{"versionstream": {testAdapter}}
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	// First a token of another adapter: its reports are refused (403).
	require.NoError(t, os.WriteFile(tokenFile, []byte(mint("svc-other", []auth.Role{auth.RoleAdapter}, "other-adapter")), 0o600))
	runner := startRuntime(t, s, script(ok), func(c *adapter.Config) { c.TokenFile = tokenFile })
	stream := streamNamed(t, s, defaultStream, bearer(mint("root", []auth.Role{auth.RoleAdmin}, "")))
	eventually(t, "a refused status post", func() bool {
		return strings.Contains(scrape(t, "http://"+runner.OpsAddr()+"/metrics"), `op="put status"} `) &&
			strings.Contains(scrape(t, "http://"+runner.OpsAddr()+"/metrics"), `code="403"`)
	})

	// Rotation: a new file replaces the old one (as the kubelet's atomic writer does).
	next := tokenFile + ".new"
	require.NoError(t, os.WriteFile(next, []byte(mint("svc-test", []auth.Role{auth.RoleAdapter}, testAdapter)), 0o600))
	require.NoError(t, os.Chtimes(next, time.Now().Add(time.Minute), time.Now().Add(time.Minute)))
	require.NoError(t, os.Rename(next, tokenFile))
	admin := bearer(mint("root", []auth.Role{auth.RoleAdmin}, ""))
	eventually(t, "the report under the rotated token", func() bool {
		resp, err := s.ListVersionStreamStatusesWithResponse(ctxFor(t), stream.Id, admin)
		require.NoError(t, err)
		for _, st := range resp.JSON200.Items {
			if st.Adapter == testAdapter && st.ObservedGeneration == 1 {
				return true
			}
		}
		return false
	})
}

func get(tb testing.TB, url string) int {
	tb.Helper()
	resp, err := http.Get(url)
	require.NoError(tb, err)
	_ = readAll(tb, resp)
	return resp.StatusCode
}

func scrape(tb testing.TB, url string) string {
	tb.Helper()
	resp, err := http.Get(url)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	return readAll(tb, resp)
}

// A re-check scheduled far ahead must not hold back a new generation: the poll finds it and it is reconciled now.
func TestRuntimeReconcilesANewGenerationDespiteAScheduledRecheck(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := streamNamed(t, s, defaultStream)
	rec := script(func(obj *adapter.Object) (adapter.Outcome, error) {
		out, err := ok(obj)
		out.RequeueAfter = time.Hour
		return out, err
	})
	startRuntime(t, s, rec, func(c *adapter.Config) { c.ResyncAfter = time.Hour })
	eventually(t, "the first report", func() bool { return adapterReport(t, s, stream, testAdapter) != nil })

	patch, err := s.PatchVersionStreamWithBodyWithResponse(ctxFor(t), stream.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec":{"channel_group":"fast"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode())
	eventually(t, "generation 2 reconciled", func() bool {
		st := adapterReport(t, s, stream, testAdapter)
		return st != nil && st.ObservedGeneration == 2
	})
}

// A child kind's reconciler sees its parent, and its reports land on the child.
func TestRuntimeFetchesTheParentOfAChildKind(t *testing.T) {
	s := startServerWith(t, map[string][]string{"nodepool": {testAdapter}})
	cluster := createCluster(t, s, "parent", nil)
	pool := createNodePool(t, s, cluster, "workers", 2)
	var mu sync.Mutex
	parents := map[string]string{}
	rec := script(func(obj *adapter.Object) (adapter.Outcome, error) {
		mu.Lock()
		if obj.Parent != nil {
			parents[obj.Name] = obj.Parent.Kind + "/" + obj.Parent.Name
		}
		mu.Unlock()
		return ok(obj)
	})
	startControllers(t, s, []adapter.Controller{{Kind: adapter.NodePools(), Reconciler: rec}})
	eventually(t, "the node pool's report", func() bool {
		resp, err := s.ListNodePoolStatusesWithResponse(ctxFor(t), cluster.Id, pool.Id)
		require.NoError(t, err)
		for _, st := range resp.JSON200.Items {
			if st.Adapter == testAdapter && st.ObservedGeneration == 1 {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{"workers": "Cluster/parent"}, parents)
}
