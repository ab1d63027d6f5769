package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// countingReconciler counts reconciles per resource name and remembers the API reads a reconciler makes.
type countingReconciler struct {
	api   *adapter.API
	mu    sync.Mutex
	calls map[string]int
	// images holds, per cluster name, the release image its stream's resolver report held when it was reconciled.
	images map[string]string
}

func (c *countingReconciler) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	// What the applier will do: read the stream the cluster names and the resolver's report on it.
	var spec api.ClusterSpec
	if err := json.Unmarshal(obj.Spec, &spec); err != nil {
		return adapter.Outcome{}, adapter.Terminal("InvalidSpec", err)
	}
	stream, err := c.api.FindByName(ctx, adapter.VersionStreams(), "", spec.VersionStream)
	if err != nil {
		return adapter.Outcome{}, err
	}
	rep, err := c.api.Report(ctx, adapter.VersionStreams(), "", stream.ID, versionresolver.Name)
	if err != nil {
		return adapter.Outcome{}, err
	}
	c.mu.Lock()
	c.calls[obj.Name]++
	c.images[obj.Name] = rep.DataString(versionresolver.DataReleaseImage)
	c.mu.Unlock()
	return ok(obj)
}

func (c *countingReconciler) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Finalized: true}, nil
}

func (c *countingReconciler) snapshot() (map[string]int, map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, images := map[string]int{}, map[string]string{}
	for k, v := range c.calls {
		calls[k] = v
	}
	for k, v := range c.images {
		images[k] = v
	}
	return calls, images
}

// A stream re-resolved to a new image re-queues the clusters that name it within one poll interval (a fake clock
// decides when the interval has passed), and only those: the clusters of another stream are not touched.
func TestDependentsRequeueTheClustersOfAChangedStream(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}, "cluster": {testAdapter}})
	sim := startSim(t, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3})
	startResolver(t, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: 200 * time.Millisecond, RetryAfter: 200 * time.Millisecond})
	moving := createStream(t, s, "moving", api.VersionStreamSpec{TargetVersion: "4.16"})
	steady := createStream(t, s, "steady", api.VersionStreamSpec{TargetVersion: "4.15"})
	waitForReport(t, s, *moving, "4.16.2", resolvedTo("4.16.2"))
	waitForReport(t, s, *steady, "4.15.2", resolvedTo("4.15.2"))

	onMoving := []string{"m-one", "m-two", "m-three"}
	onSteady := []string{"s-one", "s-two"}
	for _, name := range onMoving {
		createClusterOn(t, s, name, "moving")
	}
	for _, name := range onSteady {
		createClusterOn(t, s, name, "steady")
	}

	// The test adapter on clusters, on a fake clock: nothing but a poll (or a woken dependent) makes it reconcile.
	const interval = 5 * time.Second
	clk, runner, rec := startCountingClusterAdapter(t, s, interval, adapter.Dependents{
		Kind: adapter.VersionStreams(), Field: "version_stream", Adapter: versionresolver.Name,
		DataKeys: []string{versionresolver.DataReleaseImage},
	})
	all := append(append([]string{}, onMoving...), onSteady...)
	eventually(t, "every cluster reconciled once by the first poll", func() bool {
		calls, _ := rec.snapshot()
		for _, name := range all {
			if calls[name] != 1 {
				return false
			}
		}
		return true
	})
	_, images := rec.snapshot()
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), images["m-one"], "the reconciler reads the stream's image through the runtime's API")

	// Cincinnati publishes a patch; the resolver (on a real clock) re-resolves the moving stream.
	require.NoError(t, sim.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	waitForReport(t, s, *moving, "4.16.3", resolvedTo("4.16.3"))

	// One poll interval later, the moving stream's clusters are reconciled again, and see the new image.
	clk.Step(interval)
	eventually(t, "the moving stream's clusters reconciled again", func() bool {
		calls, _ := rec.snapshot()
		for _, name := range onMoving {
			if calls[name] != 2 {
				return false
			}
		}
		return true
	})
	// Another interval passes, so that anything else the source might have queued has had its chance.
	clk.Step(interval)
	eventually(t, "the dependents metric", func() bool {
		return strings.Contains(scrape(t, "http://"+runner.OpsAddr()+"/metrics"),
			`hyperfleet_adapter_dependents_queued_total{adapter="test-adapter",changed_kind="VersionStream",kind="Cluster"} 3`)
	})
	calls, images := rec.snapshot()
	for _, name := range onMoving {
		require.Equal(t, 2, calls[name], name)
		require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), images[name], name)
	}
	for _, name := range onSteady {
		require.Equal(t, 1, calls[name], "%s names the other stream and must not be touched", name)
	}
}

func createClusterOn(tb testing.TB, s *apiServer, name, stream string) *api.Cluster {
	tb.Helper()
	resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, api.ClusterCreate{Name: name, Spec: clusterSpec(stream)})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// With Affected, a change of a stream's report wakes only the clusters it concerns: a rollout pass that admits one
// cluster (and moves the Available message, as the resolver's revision does) re-queues that cluster alone, while a
// change every cluster acts on (the rollout pauses) re-queues them all.
func TestDependentsAffectedWakesOnlyTheNamedResources(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}, "cluster": {testAdapter}})
	stream := createStream(t, s, "rolling", api.VersionStreamSpec{TargetVersion: "4.16"})
	image := func(v string) string { return cincinnatisim.PayloadFor(v, "amd64") }
	pass := func(state string, admitted ...*api.Cluster) *rollout.Report {
		stage := rollout.StageActive
		if state != rollout.StateProgressing {
			stage = rollout.StagePaused
		}
		st := &rollout.Status{Release: "4.16.2", State: state,
			Stages: []rollout.StageStatus{{Name: rollout.DefaultStageName, State: stage}}, Admitted: map[string]rollout.Admission{}}
		for _, c := range admitted {
			st.Admitted[c.Id.String()] = rollout.Admission{Version: "4.16.2", Admitted: time.Now()}
		}
		return &rollout.Report{ReleaseImage: image("4.16.2"), ResolvedVersion: "4.16.2", InstallImage: image("4.16.1"), InstallVersion: "4.16.1",
			Graph: &rollout.Graph{Target: "4.16.2", Releases: map[string]string{"4.16.1": image("4.16.1"), "4.16.2": image("4.16.2")},
				Paths: map[string]rollout.Hops{"4.16.1": {To: "4.16.2"}, "4.16.2": {}}},
			Rollout: st}
	}
	postRolloutReport(t, s, stream, pass(rollout.StateProgressing))
	clusters := map[string]*api.Cluster{}
	for _, name := range []string{"r-one", "r-two", "r-three"} {
		clusters[name] = createClusterOn(t, s, name, "rolling")
	}

	const interval = 5 * time.Second
	clk, runner, rec := startCountingClusterAdapter(t, s, interval, adapter.Dependents{
		Kind: adapter.VersionStreams(), Field: "version_stream", Adapter: versionresolver.Name,
		DataKeys: rollout.DataKeys(), Affected: rollout.AffectedData,
	})
	callsAre := func(want map[string]int) func() bool {
		return func() bool {
			calls, _ := rec.snapshot()
			for name, n := range want {
				if calls[name] != n {
					return false
				}
			}
			return true
		}
	}
	eventually(t, "every cluster reconciled once by the first poll", callsAre(map[string]int{"r-one": 1, "r-two": 1, "r-three": 1}))

	// A pass admits r-two: only r-two is woken.
	postRolloutReport(t, s, stream, pass(rollout.StateProgressing, clusters["r-two"]))
	clk.Step(interval)
	eventually(t, "the admitted cluster reconciled again", callsAre(map[string]int{"r-two": 2}))
	clk.Step(interval) // anything else the source might have queued has had its chance
	eventually(t, "the dependents metric counts one", func() bool {
		return strings.Contains(scrape(t, "http://"+runner.OpsAddr()+"/metrics"),
			`hyperfleet_adapter_dependents_queued_total{adapter="test-adapter",changed_kind="VersionStream",kind="Cluster"} 1`)
	})
	calls, _ := rec.snapshot()
	require.Equal(t, map[string]int{"r-one": 1, "r-two": 2, "r-three": 1}, calls, "only the admitted cluster is woken")

	// The rollout pauses: every held cluster says so, so every one is woken.
	postRolloutReport(t, s, stream, pass(rollout.StatePaused, clusters["r-two"]))
	clk.Step(interval)
	eventually(t, "every cluster reconciled again", callsAre(map[string]int{"r-one": 2, "r-two": 3, "r-three": 2}))
}

// startCountingClusterAdapter runs the test adapter on clusters with dep, on a fake clock polling every interval:
// nothing but a poll (or a woken dependent) makes it reconcile.
func startCountingClusterAdapter(t *testing.T, s *apiServer, interval time.Duration, dep adapter.Dependents) (*testingclock.FakeClock, *adapter.Runner, *countingReconciler) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Now())
	cfg := runtimeConfig(t, s, testAdapter)
	cfg.Clock, cfg.PollInterval = clk, interval
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(t, err)
	rec := &countingReconciler{api: runner.API(), calls: map[string]int{}, images: map[string]string{}}
	runInBackground(t, func(ctx context.Context) error {
		return runner.Run(ctx, adapter.Controller{Kind: adapter.Clusters(), Reconciler: rec, Dependents: []adapter.Dependents{dep}})
	})
	return clk, runner, rec
}
