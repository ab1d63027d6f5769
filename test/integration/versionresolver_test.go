package integration

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// simServer serves a Cincinnati simulator on a fixed loopback address that can be taken down and brought back.
type simServer struct {
	sim  *cincinnatisim.Simulator
	addr string
	srv  *http.Server
}

func startSim(tb testing.TB, series cincinnatisim.Series) *simServer {
	tb.Helper()
	sim := cincinnatisim.New()
	require.NoError(tb, sim.AddSeries(series))
	s := &simServer{sim: sim, addr: "127.0.0.1:0"}
	s.up(tb)
	tb.Cleanup(func() { s.down(tb) })
	return s
}

func (s *simServer) url() string { return "http://" + s.addr }

// up serves the simulator (again) on its address.
func (s *simServer) up(tb testing.TB) {
	tb.Helper()
	ln, err := net.Listen("tcp", s.addr)
	require.NoError(tb, err)
	s.addr = ln.Addr().String()
	s.srv = &http.Server{Handler: s.sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
}

// down closes the listener and every connection: Cincinnati is unreachable, not merely failing.
func (s *simServer) down(tb testing.TB) {
	tb.Helper()
	if s.srv != nil {
		require.NoError(tb, s.srv.Close())
		s.srv = nil
	}
}

// runtimeConfig is the runtime's configuration for tests: fast polls, loopback ops listener, quiet logs.
func runtimeConfig(tb testing.TB, s *apiServer, name string) adapter.Config {
	tb.Helper()
	cfg := adapter.Defaults(name, "127.0.0.1:0")
	cfg.APIURL = s.base
	cfg.Transport = s.transport
	cfg.PollInterval = 100 * time.Millisecond
	cfg.DrainTimeout = 5 * time.Second
	cfg.BackoffBase = 50 * time.Millisecond
	cfg.BackoffMax = time.Second
	return cfg
}

func testLogger() *slog.Logger {
	if os.Getenv("HYPERFLEET_TEST_LOG") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewJSONHandler(io.Discard, nil))
}

// runInBackground runs fn until the test ends and checks that it returned nil after cancellation.
func runInBackground(tb testing.TB, fn func(ctx context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	tb.Cleanup(func() {
		cancel()
		require.NoError(tb, <-done)
	})
}

func startResolver(tb testing.TB, s *apiServer, sim *simServer, opts versionresolver.Options) *versionresolver.Adapter {
	tb.Helper()
	a, err := versionresolver.New(runtimeConfig(tb, s, versionresolver.Name), opts, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, a.Run)
	return a
}

func createStream(tb testing.TB, s *apiServer, name string, spec api.VersionStreamSpec) *api.VersionStream {
	tb.Helper()
	resp, err := s.CreateVersionStreamWithResponse(ctxFor(tb), nil, api.VersionStreamCreate{Name: name, Spec: spec})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// resolverReport returns the version resolver's report about a stream, or nil before its first.
func resolverReport(tb testing.TB, s *apiServer, stream api.VersionStream) *api.AdapterStatus {
	tb.Helper()
	return adapterReport(tb, s, stream, versionresolver.Name)
}

func condition(st *api.AdapterStatus, t string) *api.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// waitForReport waits until the resolver's report about the stream satisfies ok, and returns it.
func waitForReport(tb testing.TB, s *apiServer, stream api.VersionStream, what string, ok func(st *api.AdapterStatus) bool) *api.AdapterStatus {
	tb.Helper()
	var last *api.AdapterStatus
	eventually(tb, "stream "+stream.Name+": "+what, func() bool {
		last = resolverReport(tb, s, stream)
		return last != nil && ok(last)
	})
	return last
}

func resolvedTo(version string) func(st *api.AdapterStatus) bool {
	return func(st *api.AdapterStatus) bool { return st.Data[versionresolver.DataResolvedVersion] == version }
}

func getStream(tb testing.TB, s *apiServer, id api.VersionStream) *api.VersionStream {
	tb.Helper()
	resp, err := s.GetVersionStreamWithResponse(ctxFor(tb), id.Id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

func TestVersionResolverFollowsTheGraph(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}})
	sim := startSim(t, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 4, Arches: []string{"amd64", "multi"}, Prereleases: true})
	startResolver(t, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: 300 * time.Millisecond, RetryAfter: 200 * time.Millisecond})

	stable := createStream(t, s, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	candidate := createStream(t, s, "candidate-4-16", api.VersionStreamSpec{TargetVersion: "4.16",
		ChannelGroup: ptr(api.VersionStreamSpecChannelGroupCandidate)})
	multi := createStream(t, s, "multi-4-16", api.VersionStreamSpec{TargetVersion: "4.16", Arch: ptr(api.VersionStreamSpecArchMulti)})
	missing := createStream(t, s, "future", api.VersionStreamSpec{TargetVersion: "4.99"})

	st := waitForReport(t, s, *stable, "4.16.3", resolvedTo("4.16.3"))
	require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), st.Data[versionresolver.DataReleaseImage])
	require.Equal(t, "stable-4.16", st.Data[versionresolver.DataChannel])
	require.Equal(t, "amd64", st.Data[versionresolver.DataArch])
	require.NotEmpty(t, st.Data[versionresolver.DataResolvedTime])
	require.Equal(t, api.ConditionStatusTrue, condition(st, versionresolver.ConditionImageResolved).Status)
	require.Eventually(t, func() bool { return getStream(t, s, *stable).Status.Phase == api.ResourceStatusPhaseReady }, 10*time.Second, 50*time.Millisecond)

	// GA beats the candidate channel's release candidates; multi resolves to the multi payload.
	waitForReport(t, s, *candidate, "4.16.3 in candidate", resolvedTo("4.16.3"))
	st = waitForReport(t, s, *multi, "4.16.3 multi", resolvedTo("4.16.3"))
	require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "multi"), st.Data[versionresolver.DataReleaseImage])

	// A minor Cincinnati has no channel for is reported, not guessed.
	st = waitForReport(t, s, *missing, "ResolutionFailed", func(st *api.AdapterStatus) bool { return condition(st, versionresolver.ConditionImageResolved) != nil })
	require.Equal(t, versionresolver.ReasonResolutionFailed, deref(condition(st, versionresolver.ConditionImageResolved).Reason))
	require.Contains(t, deref(condition(st, versionresolver.ConditionImageResolved).Message), "stable-4.99")
	require.Equal(t, api.ConditionStatusFalse, condition(st, "Available").Status)

	// A new patch is picked up on the next re-check.
	require.NoError(t, sim.sim.Publish("stable-4.16", "amd64", "4.16.4", cincinnatisim.PayloadFor("4.16.4", "amd64")))
	st = waitForReport(t, s, *stable, "4.16.4", resolvedTo("4.16.4"))
	require.Equal(t, cincinnatisim.PayloadFor("4.16.4", "amd64"), st.Data[versionresolver.DataReleaseImage])

	// A pulled release is kept: never backwards.
	require.True(t, sim.sim.Remove("stable-4.16", "amd64", "4.16.4"))
	st = waitForReport(t, s, *stable, "RemovedFromGraph", func(st *api.AdapterStatus) bool {
		c := condition(st, versionresolver.ConditionResolvedVersionInGraph)
		return c != nil && c.Status == api.ConditionStatusFalse
	})
	require.Equal(t, "4.16.4", st.Data[versionresolver.DataResolvedVersion])

	// Cincinnati down: the image stays, the stream stays Available and Ready, ImageResolved says why.
	sim.down(t)
	st = waitForReport(t, s, *stable, "CincinnatiUnavailable", func(st *api.AdapterStatus) bool {
		return deref(condition(st, versionresolver.ConditionImageResolved).Reason) == versionresolver.ReasonCincinnatiUnavailable
	})
	require.Equal(t, api.ConditionStatusFalse, condition(st, versionresolver.ConditionImageResolved).Status)
	require.Equal(t, api.ConditionStatusTrue, condition(st, "Available").Status)
	require.Equal(t, cincinnatisim.PayloadFor("4.16.4", "amd64"), st.Data[versionresolver.DataReleaseImage])
	require.Equal(t, api.ResourceStatusPhaseReady, getStream(t, s, *stable).Status.Phase)
	sim.up(t)
	waitForReport(t, s, *stable, "resolved again", func(st *api.AdapterStatus) bool {
		return condition(st, versionresolver.ConditionImageResolved).Status == api.ConditionStatusTrue
	})

	// A new target is a new generation, resolved afresh; the old generation is never reported again. Going back a
	// minor takes an admin's force.
	patch, err := s.PatchVersionStreamWithBodyWithResponse(ctxFor(t), stable.Id, &api.PatchVersionStreamParams{Force: ptr(true)},
		"application/merge-patch+json", strings.NewReader(`{"spec":{"target_version":"4.15"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode(), "body: %s", patch.Body)
	st = waitForReport(t, s, *stable, "4.15.3", resolvedTo("4.15.3"))
	require.Equal(t, int64(2), st.ObservedGeneration)
	require.Equal(t, "stable-4.15", st.Data[versionresolver.DataChannel])
	for range 10 { // several re-checks
		time.Sleep(100 * time.Millisecond)
		st = resolverReport(t, s, *stable)
		require.Equal(t, int64(2), st.ObservedGeneration)
		require.Equal(t, "4.15.3", st.Data[versionresolver.DataResolvedVersion])
	}
}

// recordingReconciler remembers which streams one replica reconciled.
type recordingReconciler struct {
	adapter.Reconciler
	mu   sync.Mutex
	seen map[string]bool
}

func (r *recordingReconciler) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	r.mu.Lock()
	r.seen[obj.ID] = true
	r.mu.Unlock()
	return r.Reconciler.Reconcile(ctx, obj)
}

func TestResolverReplicasSplitTheFleet(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}})
	sim := startSim(t, cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 3})
	replicas := make([]*recordingReconciler, 2)
	for i := range replicas {
		cfg := runtimeConfig(t, s, versionresolver.Name)
		cfg.ShardIndex, cfg.ShardCount, cfg.Replica = i, 2, "replica-"+string(rune('a'+i))
		cfg.ResyncAfter = time.Minute // as the resolver's own wiring does: live replicas report at least this often
		runner, err := adapter.New(cfg, testLogger())
		require.NoError(t, err)
		rec := &versionresolver.Reconciler{Graphs: cincinnati.NewClient(sim.url(), nil)}
		require.NoError(t, rec.Check())
		replicas[i] = &recordingReconciler{Reconciler: rec, seen: map[string]bool{}}
		runInBackground(t, func(ctx context.Context) error {
			return runner.Run(ctx, adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: replicas[i]})
		})
	}

	const streams = 100
	for i := range streams {
		createStream(t, s, "fleet-"+string(rune('a'+i/26))+string(rune('a'+i%26)), api.VersionStreamSpec{TargetVersion: "4.16"})
	}
	require.Eventually(t, func() bool {
		resp, err := s.ListVersionStreamsWithResponse(ctxFor(t), &api.ListVersionStreamsParams{Search: ptr("status.phase = 'Ready'"), Size: ptr(1)})
		require.NoError(t, err)
		return deref(resp.JSON200.Total) == streams+1 // and the seeded default stream
	}, 30*time.Second, 100*time.Millisecond)

	a, b := replicas[0].seen, replicas[1].seen
	for id := range a {
		require.False(t, b[id], "stream %s was reconciled by both replicas", id)
	}
	require.Equal(t, streams+1, len(a)+len(b))
	require.NotEmpty(t, a)
	require.NotEmpty(t, b)
	t.Logf("replica a reconciled %d streams, replica b %d", len(a), len(b))

	// A third replica that disagrees on the shard count refuses to start.
	cfg := runtimeConfig(t, s, versionresolver.Name)
	cfg.ShardIndex, cfg.ShardCount, cfg.Replica, cfg.ResyncAfter = 0, 3, "replica-c", time.Minute
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(t, err)
	err = runner.Run(ctxFor(t), adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: replicas[0]})
	require.Error(t, err)
	require.Contains(t, err.Error(), "--shard-count 2")
	require.False(t, errors.Is(err, context.Canceled))
}
