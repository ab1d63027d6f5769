package integration

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// tally reconciles everything successfully and counts its calls per resource name.
type tally struct {
	mu    sync.Mutex
	calls map[string]int
}

func newTally() *tally { return &tally{calls: map[string]int{}} }

func (t *tally) Reconcile(_ context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	t.mu.Lock()
	t.calls[obj.Name]++
	t.mu.Unlock()
	return ok(obj)
}

func (t *tally) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Finalized: true}, nil
}

func (t *tally) count(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[name]
}

func patchStream(tb testing.TB, s *apiServer, id api.VersionStream, patch string) {
	tb.Helper()
	resp, err := s.PatchVersionStreamWithBodyWithResponse(ctxFor(tb), id.Id, nil, "application/merge-patch+json", strings.NewReader(patch))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
}

func reportedAt(tb testing.TB, s *apiServer, stream api.VersionStream, generation int64) bool {
	tb.Helper()
	st := adapterReport(tb, s, stream, testAdapter)
	return st != nil && st.ObservedGeneration == generation
}

// With the watch source (the default) a create and a spec change are reconciled although the poll never runs
// after the first list: the runtime heard of them through the watch.
func TestWatchSourcePicksUpChangesWithoutAPoll(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	rec := newTally()
	runner := startRuntime(t, s, rec, noPoll)
	eventually(t, "the default stream reconciled from the first list", func() bool { return rec.count(defaultStream) == 1 })

	later := createStream(t, s, "created-later", api.VersionStreamSpec{TargetVersion: "4.16"})
	eventually(t, "the new stream reported on", func() bool { return reportedAt(t, s, *later, 1) })
	patchStream(t, s, *later, `{"spec":{"channel_group":"fast"}}`)
	eventually(t, "generation 2 reported on", func() bool { return reportedAt(t, s, *later, 2) })

	tests := []struct {
		series  string
		want    float64
		atLeast bool
	}{
		// One list of pending work, the watch's first: the poll's interval never passed.
		{series: series("hyperfleet_adapter_polls_total", "kind=VersionStream", "result=success"), want: 1},
		{series: series("hyperfleet_adapter_relists_total", "kind=VersionStream", "reason=start"), want: 1},
		{series: series("hyperfleet_adapter_source_reconnects_total", "kind=VersionStream", "source=watch"), want: 0},
		{series: series("hyperfleet_adapter_events_received_total", "kind=VersionStream", "source=watch", "type=created"), want: 1, atLeast: true},
		{series: series("hyperfleet_adapter_events_received_total", "kind=VersionStream", "source=watch", "type=updated"), want: 1, atLeast: true},
		{series: series("hyperfleet_adapter_feed_position", "kind=VersionStream", "source=watch"), want: 1, atLeast: true},
		{series: series("hyperfleet_adapter_event_lag_seconds_count", "source=watch"), want: 2, atLeast: true},
	}
	for _, tt := range tests {
		got := metricValue(t, runner, tt.series)
		if tt.atLeast {
			require.GreaterOrEqual(t, got, tt.want, tt.series)
			continue
		}
		require.Equal(t, tt.want, got, tt.series)
	}
	require.GreaterOrEqual(t, rec.count("created-later"), 2, "once per generation at least")
}

// The API restarts while the runtime watches (same address, same database). Changes made meanwhile, through
// another API process, reach the runtime when it resumes with Last-Event-ID: without a list, and without a poll.
func TestWatchSourceResumesAfterTheAPIRestarts(t *testing.T) {
	required := map[string][]string{"versionstream": {testAdapter}}
	s := startServerWith(t, required) // the test's own way in, and a second API on the database
	restarted := startRestartable(t, s.dsn, server.Config{RequiredAdapters: required})
	rec := newTally()
	runner := watchStreams(t, restarted.url(), rec)

	restarted.stop()
	away := []string{"while-away-1", "while-away-2", "while-away-3"}
	for _, name := range away {
		createStream(t, s, name, api.VersionStreamSpec{TargetVersion: "4.16"})
	}
	restarted.start()
	eventually(t, "the streams created while the API was away reconciled", func() bool {
		for _, name := range away {
			if rec.count(name) != 1 {
				return false
			}
		}
		return true
	})
	require.Equal(t, 1.0, metricValue(t, runner, series("hyperfleet_adapter_polls_total", "kind=VersionStream", "result=success")),
		"one list, at start: the watch resumed rather than listed again")
	require.Zero(t, metricValue(t, runner, series("hyperfleet_adapter_relists_total", "kind=VersionStream", "reason=expired")))
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_source_reconnects_total", "kind=VersionStream", "source=watch")), 1.0)
}

// The runtime's watch position falls behind the API's retention while the API is away: the resumed watch is
// answered 410, and the runtime lists again and finds what it missed.
func TestWatchSourceListsAgainWhenItsPositionExpired(t *testing.T) {
	overrides := server.Config{RequiredAdapters: map[string][]string{"versionstream": {testAdapter}},
		EventsMax: 5, EventsCompactEvery: 50 * time.Millisecond}
	s := startServerOn(t, harness.NewDatabase(t), overrides)
	restarted := startRestartable(t, s.dsn, overrides)
	rec := newTally()
	runner := watchStreams(t, restarted.url(), rec)
	position := metricValue(t, runner, series("hyperfleet_adapter_feed_position", "kind=VersionStream", "source=watch"))

	restarted.stop()
	var missed []string
	for _, name := range []string{"missed-1", "missed-2", "missed-3", "missed-4", "missed-5", "missed-6", "missed-7", "missed-8"} {
		createStream(t, s, name, api.VersionStreamSpec{TargetVersion: "4.16"})
		missed = append(missed, name)
	}
	ctx := ctxFor(t)
	db, err := pgx.Connect(ctx, s.dsn)
	require.NoError(t, err)
	defer db.Close(ctx)
	eventually(t, "retention to pass the runtime's position", func() bool {
		var through int64
		return db.QueryRow(ctx, "SELECT compacted_through FROM event_feed").Scan(&through) == nil && float64(through) > position
	})
	restarted.start()
	eventually(t, "every stream created while the API was away reconciled", func() bool {
		for _, name := range missed {
			if rec.count(name) != 1 {
				return false
			}
		}
		return true
	})
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_relists_total", "kind=VersionStream", "reason=expired")), 1.0)
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_polls_total", "kind=VersionStream", "result=success")), 2.0,
		"the first list and the one after the 410")
}

// A VersionStream re-resolved to a new image wakes the clusters that name it through its status event: the
// clusters' runtime never polls after its first list.
func TestWatchWakesDependentsOnTheirStreamsStatusEvent(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}, "cluster": {testAdapter}})
	sim := startSim(t, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3})
	startResolverTuned(t, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: 200 * time.Millisecond, RetryAfter: 200 * time.Millisecond}, noPoll)
	moving := createStream(t, s, "moving", api.VersionStreamSpec{TargetVersion: "4.16"})
	steady := createStream(t, s, "steady", api.VersionStreamSpec{TargetVersion: "4.15"})
	waitForReport(t, s, *moving, "4.16.2", resolvedTo("4.16.2"))
	waitForReport(t, s, *steady, "4.15.2", resolvedTo("4.15.2"))
	for _, c := range []struct{ name, stream string }{{"m-one", "moving"}, {"m-two", "moving"}, {"s-one", "steady"}} {
		createClusterOn(t, s, c.name, c.stream)
	}

	cfg := runtimeConfig(t, s, testAdapter)
	noPoll(&cfg)
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(t, err)
	rec := &countingReconciler{api: runner.API(), calls: map[string]int{}, images: map[string]string{}}
	runInBackground(t, func(ctx context.Context) error {
		return runner.Run(ctx, adapter.Controller{Kind: adapter.Clusters(), Reconciler: rec, Dependents: []adapter.Dependents{{
			Kind: adapter.VersionStreams(), Field: "version_stream", Adapter: versionresolver.Name,
			DataKeys: []string{versionresolver.DataReleaseImage},
		}}})
	})
	eventually(t, "every cluster reconciled once by the first list", func() bool {
		calls, _ := rec.snapshot()
		return calls["m-one"] == 1 && calls["m-two"] == 1 && calls["s-one"] == 1
	})
	// The clusters' list and the dependents' list run apart: the first can be done before the second.
	var ref adapter.Reference
	eventually(t, "the dependents watch's list to see the stream", func() bool {
		var found bool
		ref, found = runner.Referenced(adapter.VersionStreams(), "moving")
		return found
	})
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), ref.Data[versionresolver.DataReleaseImage])

	require.NoError(t, sim.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	eventually(t, "the moving stream's clusters reconciled again", func() bool {
		calls, _ := rec.snapshot()
		return calls["m-one"] == 2 && calls["m-two"] == 2
	})
	require.Equal(t, 2.0, metricValue(t, runner, series("hyperfleet_adapter_dependents_queued_total", "changed_kind=VersionStream", "kind=Cluster")),
		"the two clusters of the moving stream, and not the steady stream's")
	calls, images := rec.snapshot()
	require.Equal(t, 1, calls["s-one"])
	for _, name := range []string{"m-one", "m-two"} {
		require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), images[name], name)
	}
	ref, _ = runner.Referenced(adapter.VersionStreams(), "moving")
	require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), ref.Data[versionresolver.DataReleaseImage])
	require.Equal(t, 1.0, metricValue(t, runner, series("hyperfleet_adapter_polls_total", "kind=Cluster", "result=success")),
		"the clusters' pending work was listed once")
}

// A removed event drops what the runtime kept about the resource: the report it posted (its cache) and, for a
// referenced kind, the reference Runner.Referenced answers from.
func TestRemovedEventsDropTheRuntimesState(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	rec := newTally()
	runner := startControllers(t, s, []adapter.Controller{
		{Kind: adapter.VersionStreams(), Reconciler: rec},
		// Clusters follow the streams' specs, so that the runtime keeps references to the streams too.
		{Kind: adapter.Clusters(), Reconciler: newTally(), Dependents: []adapter.Dependents{{Kind: adapter.VersionStreams(), Field: "version_stream"}}},
	}, noPoll)
	cached := series("hyperfleet_adapter_cached_reports")
	eventually(t, "the default stream's report cached", func() bool { return metricValue(t, runner, cached) == 1 })

	doomed := createStream(t, s, "doomed", api.VersionStreamSpec{TargetVersion: "4.16"})
	eventually(t, "the new stream's report cached and the stream referenced", func() bool {
		_, referenced := runner.Referenced(adapter.VersionStreams(), "doomed")
		return metricValue(t, runner, cached) == 2 && referenced
	})

	del, err := s.DeleteVersionStreamWithResponse(ctxFor(t), doomed.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	eventually(t, "the stream finalized and removed", func() bool {
		resp, err := s.GetVersionStreamWithResponse(ctxFor(t), doomed.Id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
	eventually(t, "the removed event to drop the stream's report and reference", func() bool {
		_, referenced := runner.Referenced(adapter.VersionStreams(), "doomed")
		return metricValue(t, runner, cached) == 1 && !referenced
	})
	_, referenced := runner.Referenced(adapter.VersionStreams(), defaultStream)
	require.True(t, referenced, "the other stream is still known")
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_events_received_total", "kind=VersionStream", "source=watch", "type=removed")), 1.0)
	require.Equal(t, 1.0, metricValue(t, runner, series("hyperfleet_adapter_polls_total", "kind=VersionStream", "result=success")))
}

// startResolverTuned starts the version resolver with runtimeConfig changed by tune.
func startResolverTuned(tb testing.TB, s *apiServer, _ *simServer, opts versionresolver.Options, tune ...func(*adapter.Config)) *versionresolver.Adapter {
	tb.Helper()
	cfg := runtimeConfig(tb, s, versionresolver.Name)
	for _, f := range tune {
		f(&cfg)
	}
	a, err := versionresolver.New(cfg, opts, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, a.Run)
	return a
}

// A watch on a kind nobody changes hears only the API's heartbeats, and they are enough: it keeps its one
// connection for many idle timeouts. The API's heartbeat and the runtime's idle timeout keep the ratio of their
// defaults (15 s to 60 s), scaled down, and the API's read and write timeouts are far shorter than the stream.
func TestQuietWatchKeepsItsConnection(t *testing.T) {
	required := map[string][]string{"versionstream": {testAdapter}}
	s := startServerWith(t, required)
	quiet := startRestartable(t, s.dsn, server.Config{RequiredAdapters: required, WatchHeartbeat: 250 * time.Millisecond,
		HTTPReadTimeout: 500 * time.Millisecond, HTTPWriteTimeout: 500 * time.Millisecond, HTTPIdleTimeout: 8 * time.Second})
	runner := watchStreamsTuned(t, quiet.url(), newTally(), func(c *adapter.Config) { c.WatchIdleTimeout = time.Second })
	time.Sleep(10 * time.Second) // forty heartbeats, ten idle timeouts
	require.Zero(t, metricValue(t, runner, series("hyperfleet_adapter_source_reconnects_total", "kind=VersionStream", "source=watch")))
	require.Equal(t, 1.0, metricValue(t, runner, series("hyperfleet_adapter_relists_total", "kind=VersionStream", "reason=start")))
}

// An API outage makes the adapter unready, never unhealthy: liveness is the process's own loops, so Kubernetes
// does not restart a replica (and lose its state) for an outage it can only wait out. It is ready again once the
// API is back.
func TestAPIOutageMakesAdaptersUnreadyNotUnhealthy(t *testing.T) {
	required := map[string][]string{"versionstream": {testAdapter}}
	s := startServerWith(t, required)
	flaky := startRestartable(t, s.dsn, server.Config{RequiredAdapters: required, WatchHeartbeat: 250 * time.Millisecond})
	runner := watchStreamsTuned(t, flaky.url(), newTally(), func(c *adapter.Config) { c.WatchIdleTimeout = time.Second })
	ops := "http://" + runner.OpsAddr()
	eventually(t, "ready", func() bool { return get(t, ops+"/readyz") == http.StatusOK })

	flaky.stop()
	// The outage lasts well past the readiness window (three idle timeouts); liveness holds throughout.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		require.Equal(t, http.StatusOK, get(t, ops+"/healthz"), "liveness during the outage")
	}
	code, body := getBody(t, ops+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "hyperfleet-api unreachable")
	require.Zero(t, metricValue(t, runner, `hyperfleet_adapter_ready{adapter="`+testAdapter+`"}`))

	flaky.start()
	eventually(t, "ready again after the outage", func() bool { return get(t, ops+"/readyz") == http.StatusOK })
	require.Equal(t, 1.0, metricValue(t, runner, `hyperfleet_adapter_live{adapter="`+testAdapter+`"}`))
}

// getBody is get with the answer's body.
func getBody(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	require.NoError(tb, err)
	return resp.StatusCode, readAll(tb, resp)
}
