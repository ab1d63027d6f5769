package integration

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// createStreamJSON creates a VersionStream from a spec written as JSON (the rollout policy reads best so).
func createStreamJSON(tb testing.TB, s *apiServer, name, spec string) *api.VersionStream {
	tb.Helper()
	body := fmt.Sprintf(`{"name":%q,"spec":%s}`, name, spec)
	resp, err := s.CreateVersionStreamWithBodyWithResponse(ctxFor(tb), nil, "application/json", strings.NewReader(body))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// createFleet creates n clusters named <prefix>-NNN on stream with labels, eight at a time.
func createFleet(tb testing.TB, s *apiServer, prefix, stream string, n int, labels map[string]string) {
	tb.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			l := api.Labels(labels)
			resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, api.ClusterCreate{Name: fmt.Sprintf("%s-%03d", prefix, i), Labels: &l,
				Spec: clusterSpec(stream)})
			if err == nil && resp.StatusCode() != http.StatusCreated {
				err = fmt.Errorf("create: %d %s", resp.StatusCode(), resp.Body)
			}
			return err
		})
	}
	require.NoError(tb, g.Wait())
}

// countClusters counts the clusters a search matches.
func countClusters(tb testing.TB, s *apiServer, search string) int {
	tb.Helper()
	resp, err := s.http.Get(s.base + "/api/hyperfleet/v1/clusters?size=1&fields=id&search=" + url.QueryEscape(search))
	require.NoError(tb, err)
	m := readyTotal.FindStringSubmatch(readAll(tb, resp))
	require.Len(tb, m, 2)
	var n int
	_, err = fmt.Sscan(m[1], &n)
	require.NoError(tb, err)
	return n
}

// streamRollout reads the rollout part of the resolver's report on a stream; nil before its first.
func streamRollout(tb testing.TB, s *apiServer, stream *api.VersionStream) *rollout.Report {
	tb.Helper()
	st := resolverReport(tb, s, *stream)
	if st == nil {
		return nil
	}
	r, err := rollout.ReportOf(st.Data)
	require.NoError(tb, err)
	return r
}

// waitRollout waits up to within for the stream's rollout to satisfy ok, and returns it.
func waitRollout(tb testing.TB, s *apiServer, stream *api.VersionStream, within time.Duration, what string, ok func(r *rollout.Report) bool) *rollout.Report {
	tb.Helper()
	var last *rollout.Report
	waitWithin(tb, within, "stream "+stream.Name+": "+what, func() bool {
		last = streamRollout(tb, s, stream)
		return last != nil && last.Rollout != nil && ok(last)
	})
	return last
}

func completeAt(version string) func(r *rollout.Report) bool {
	return func(r *rollout.Report) bool {
		return r.Rollout.Release == version && r.Rollout.State == rollout.StateComplete
	}
}

// move is one entry of a HostedCluster's status.version.history.
type move struct {
	cluster, version, state string
	started, completed      time.Time
}

// histories reads every HostedCluster's version history in the world's namespace, by HostedCluster name.
func (w *applierWorld) histories(tb testing.TB) map[string][]move {
	tb.Helper()
	list, err := w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace).List(ctxFor(tb), metav1.ListOptions{})
	require.NoError(tb, err)
	out := map[string][]move{}
	for _, hc := range list.Items {
		entries, _, _ := unstructured.NestedSlice(hc.Object, "status", "version", "history")
		for _, e := range entries {
			m, _ := e.(map[string]any)
			mv := move{cluster: hc.GetName()}
			mv.version, _ = m["version"].(string)
			mv.state, _ = m["state"].(string)
			if s, ok := m["startedTime"].(string); ok {
				mv.started, _ = time.Parse(time.RFC3339, s)
			}
			if s, ok := m["completionTime"].(string); ok {
				mv.completed, _ = time.Parse(time.RFC3339, s)
			}
			out[hc.GetName()] = append(out[hc.GetName()], mv)
		}
	}
	return out
}

// movesTo returns each named cluster's move to version (the HostedCluster's history entry), failing for a cluster
// without one.
func movesTo(tb testing.TB, all map[string][]move, version string, names []string) []move {
	tb.Helper()
	var out []move
	for _, name := range names {
		i := slices.IndexFunc(all[name], func(m move) bool { return m.version == version })
		require.GreaterOrEqual(tb, i, 0, "%s has moved to %s", name, version)
		out = append(out, all[name][i])
	}
	return out
}

// mostAtOnce is the largest number of moves in progress at one instant. History times are kept to the second, so a
// move that finished in the second another started does not count as overlapping it: the count can only be low by
// moves that really overlapped within one second, never high.
func mostAtOnce(moves []move) int {
	most := 0
	for _, a := range moves {
		n := 0
		for _, b := range moves {
			if !b.started.After(a.started) && a.started.Before(b.completed) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func fleetNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func stageTimes(moves []move) (firstStart, lastDone time.Time) {
	for i, m := range moves {
		if i == 0 || m.started.Before(firstStart) {
			firstStart = m.started
		}
		if m.completed.After(lastDone) {
			lastDone = m.completed
		}
	}
	return firstStart, lastDone
}

// A good release reaches 300 clusters stage by stage: 3 canaries one at a time, 30 early ten at a time, then the
// other 267 a quarter at a time; no stage starts before the previous one's last cluster finished plus its soak, and
// no stage ever has more than its limit in progress. The HostedClusters' version history is the witness.
func TestStagedRolloutOfAGoodRelease(t *testing.T) {
	const soak = 2 * time.Second
	w := startApplierWorldWith(t, worldOptions{delay: 200 * time.Millisecond})
	w.startApplier(t, nil, nil)
	stream := createStreamJSON(t, w.api, "fleet", `{"target_version":"4.16","rollout":{"stages":[
		{"name":"canary","selector":"stage=canary","max_at_once":1,"soak":"2s"},
		{"name":"early","selector":"stage=early","max_at_once":10,"soak":"2s"},
		{"name":"rest","max_at_once":"25%"}]}}`)
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	createFleet(t, w.api, "canary", "fleet", 3, map[string]string{"stage": "canary"})
	createFleet(t, w.api, "early", "fleet", 30, map[string]string{"stage": "early"})
	createFleet(t, w.api, "rest", "fleet", 267, nil)
	waitWithin(t, 5*time.Minute, "300 clusters Ready", func() bool { return countClusters(t, w.api, "status.phase = 'Ready'") == 300 })
	waitRollout(t, w.api, stream, time.Minute, "4.16.2 everywhere", completeAt("4.16.2"))

	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", ""))
	done := waitRollout(t, w.api, stream, 5*time.Minute, "4.16.3 rolled out", completeAt("4.16.3"))
	for _, st := range done.Rollout.Stages {
		require.Equal(t, st.Clusters, st.Upgraded, "stage %s: every cluster upgraded", st.Name)
	}

	all := w.histories(t)
	canary, early, rest := movesTo(t, all, "4.16.3", fleetNames("canary", 3)), movesTo(t, all, "4.16.3", fleetNames("early", 30)),
		movesTo(t, all, "4.16.3", fleetNames("rest", 267))
	for _, stage := range []struct {
		name  string
		moves []move
		limit int
	}{{"canary", canary, 1}, {"early", early, 10}, {"rest", rest, int(math.Ceil(267 * 0.25))}} {
		require.LessOrEqual(t, mostAtOnce(stage.moves), stage.limit, "stage %s stays within max_at_once", stage.name)
		for _, m := range stage.moves {
			require.Equal(t, "Completed", m.state, "%s completed 4.16.3", m.cluster)
		}
	}
	_, canaryDone := stageTimes(canary)
	earlyStart, earlyDone := stageTimes(early)
	restStart, _ := stageTimes(rest)
	// Seconds are truncated: a start may read up to a second early.
	require.False(t, earlyStart.Before(canaryDone.Add(soak-time.Second)),
		"early starts (%s) after the canary's last finish (%s) plus the soak", earlyStart, canaryDone)
	require.False(t, restStart.Before(earlyDone.Add(soak-time.Second)),
		"rest starts (%s) after early's last finish (%s) plus the soak", restStart, earlyDone)
	t.Logf("canary finished %s, early %s → %s, rest from %s", canaryDone, earlyStart, earlyDone, restStart)
}

// A release that fails in the canary pauses the rollout within the canary's failure budget: no cluster outside the
// canary is touched. A fixed release is published and the rollout resumed: the fleet converges on it.
func TestBadReleasePausesTheRolloutInTheCanary(t *testing.T) {
	failures := &hypershiftsim.Failures{}
	w := startApplierWorldWith(t, worldOptions{delay: 200 * time.Millisecond, failures: failures})
	w.startApplier(t, nil, nil)
	stream := createStreamJSON(t, w.api, "guarded", `{"target_version":"4.16","rollout":{"stages":[
		{"name":"canary","selector":"stage=canary","max_at_once":1},
		{"name":"rest","max_at_once":"50%"}]}}`)
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	createFleet(t, w.api, "canary", "guarded", 3, map[string]string{"stage": "canary"})
	createFleet(t, w.api, "rest", "guarded", 12, nil)
	waitWithin(t, 2*time.Minute, "15 clusters Ready", func() bool { return countClusters(t, w.api, "status.phase = 'Ready'") == 15 })
	waitRollout(t, w.api, stream, time.Minute, "4.16.2 everywhere", completeAt("4.16.2"))

	require.NoError(t, failures.Set(hypershiftsim.Failure{Version: "4.16.3", Mode: hypershiftsim.FailDegraded}))
	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", ""))
	paused := waitRollout(t, w.api, stream, time.Minute, "the rollout paused itself", func(r *rollout.Report) bool {
		return r.Rollout.Release == "4.16.3" && r.Rollout.State == rollout.StatePausedByFailures
	})
	require.Len(t, paused.Rollout.Failed, 1, "the budget is 0: the first failure pauses")
	require.Equal(t, "canary", paused.Rollout.Failed[0].Stage)
	require.Equal(t, rollout.FailedDegraded, paused.Rollout.Failed[0].Reason)
	require.Contains(t, paused.Rollout.Message, paused.Rollout.Failed[0].Name)

	// Passes go on; nothing else moves.
	time.Sleep(2 * time.Second)
	bad := cincinnatisim.PayloadFor("4.16.3", "amd64")
	touched := 0
	for _, name := range append(fleetNames("canary", 3), fleetNames("rest", 12)...) {
		if releaseImageOf(w.hostedCluster(t, name)) == bad {
			require.True(t, strings.HasPrefix(name, "canary"), "%s is outside the canary and got the bad release", name)
			touched++
		}
	}
	require.Equal(t, 1, touched, "only the failed canary got the bad release")

	// A fixed release, and a resume: the fleet converges, the failed canary included.
	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.4", ""))
	waitForReport(t, w.api, *stream, "4.16.4", resolvedTo("4.16.4"))
	still := streamRollout(t, w.api, stream)
	require.Equal(t, rollout.StatePausedByFailures, still.Rollout.State, "a newer release does not resume a rollout that paused itself")
	patchStream(t, w.api, *stream, fmt.Sprintf(`{"spec":{"rollout":{"resumed_at":%q}}}`, time.Now().UTC().Format(time.RFC3339)))
	waitRollout(t, w.api, stream, 2*time.Minute, "4.16.4 rolled out", completeAt("4.16.4"))
	all := w.histories(t)
	for _, name := range append(fleetNames("canary", 3), fleetNames("rest", 12)...) {
		require.Equal(t, "4.16.4", all[name][0].version, name)
		require.Equal(t, "Completed", all[name][0].state, name)
	}
}

// A conditional edge holds clusters, with the risk named, until the risk is accepted on the cluster or its stream;
// a pulled release is never a target; a version without an edge to the target blocks with NoUpdatePath.
func TestRolloutFollowsTheUpdateGraph(t *testing.T) {
	w := startApplierWorldWith(t, worldOptions{delay: 100 * time.Millisecond})
	w.startApplier(t, nil, nil)
	stream := createStreamJSON(t, w.api, "risky", `{"target_version":"4.16"}`)
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	a := createClusterNamed(t, w.api, "alpha", "risky", nil)
	b := createClusterNamed(t, w.api, "bravo", "risky", nil)
	waitForPhase(t, w.api, a, api.ResourceStatusPhaseReady)
	waitForPhase(t, w.api, b, api.ResourceStatusPhaseReady)
	sim := w.cincinati.sim
	const channel, arch = "stable-4.16", "amd64"

	// 4.16.3 arrives reachable from 4.16.2 only through a risk (changed while Cincinnati is away, so that the
	// resolver never sees the plain edge).
	w.cincinati.down(t)
	require.NoError(t, sim.Publish(channel, arch, "4.16.3", ""))
	require.NoError(t, sim.AddConditionalEdge(channel, arch, "4.16.2", "4.16.3", []cincinnatisim.Risk{{Name: "TestRiskDNS",
		URL: "https://issues.example.com/TestRiskDNS", Message: "DNS may break after the update.",
		MatchingRules: []cincinnati.MatchingRule{{Type: cincinnati.RuleAlways}}}}))
	w.cincinati.up(t)
	waitForReport(t, w.api, *stream, "4.16.3", resolvedTo("4.16.3"))
	for _, c := range []*api.Cluster{a, b} {
		eventually(t, c.Name+" says which risk holds it", func() bool {
			st := applierReport(t, w.api, c)
			cond := condition(st, hostedcluster.ConditionUpgradeBlocked)
			return cond != nil && cond.Status == "True" && deref(cond.Reason) == rollout.BlockedRiskNotAccepted &&
				strings.Contains(deref(cond.Message), "TestRiskDNS") && strings.Contains(deref(cond.Message), "https://issues.example.com/TestRiskDNS")
		})
	}
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", arch), releaseImageOf(w.hostedCluster(t, "alpha")))

	// Accepted on one cluster: it moves; the other still holds. Accepted on the stream: both.
	patchCluster(t, w.api, a, `{"spec":{"accepted_risks":["TestRiskDNS"]}}`)
	eventually(t, "a moves to 4.16.3", func() bool { return currentVersionOf(t, w.api, a) == "4.16.3" })
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", arch), releaseImageOf(w.hostedCluster(t, "bravo")))
	patchStream(t, w.api, *stream, `{"spec":{"accepted_risks":["TestRiskDNS"]}}`)
	eventually(t, "b moves to 4.16.3", func() bool { return currentVersionOf(t, w.api, b) == "4.16.3" })

	// 4.16.4 is published while the rollout is paused, then pulled: it is never a target.
	patchStream(t, w.api, *stream, `{"spec":{"rollout":{"paused":true}}}`)
	require.NoError(t, sim.Publish(channel, arch, "4.16.4", ""))
	waitForReport(t, w.api, *stream, "4.16.4", resolvedTo("4.16.4"))
	require.True(t, sim.Remove(channel, arch, "4.16.4"))
	patchStream(t, w.api, *stream, `{"spec":{"rollout":{"paused":false}}}`)
	waitRollout(t, w.api, stream, 30*time.Second, "the rollout falls back to 4.16.3", completeAt("4.16.3"))

	// 4.16.5 with no edge from 4.16.3: the clusters block with NoUpdatePath and stay.
	w.cincinati.down(t)
	require.NoError(t, sim.Publish(channel, arch, "4.16.5", ""))
	require.True(t, sim.RemoveEdge(channel, arch, "4.16.3", "4.16.5"))
	w.cincinati.up(t)
	waitForReport(t, w.api, *stream, "4.16.5", resolvedTo("4.16.5"))
	for _, c := range []*api.Cluster{a, b} {
		eventually(t, c.Name+" has no update path", func() bool {
			return conditionIs(applierReport(t, w.api, c), hostedcluster.ConditionUpgradeBlocked, "True", rollout.BlockedNoUpdatePath)
		})
	}
	for _, name := range []string{"alpha", "bravo"} {
		for _, m := range w.histories(t)[name] {
			require.NotEqual(t, "4.16.4", m.version, "%s never ran the pulled release", name)
		}
		require.Equal(t, cincinnatisim.PayloadFor("4.16.3", arch), releaseImageOf(w.hostedCluster(t, name)))
	}
}

// `paused: true` on the rollout stops new starts; resuming continues where it stopped.
func TestRolloutPauseAndResume(t *testing.T) {
	w := startApplierWorldWith(t, worldOptions{delay: 300 * time.Millisecond})
	w.startApplier(t, nil, nil)
	stream := createStreamJSON(t, w.api, "slow", `{"target_version":"4.16","rollout":{"stages":[{"name":"all","max_at_once":1}]}}`)
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	createFleet(t, w.api, "c", "slow", 6, nil)
	waitWithin(t, time.Minute, "6 clusters Ready", func() bool { return countClusters(t, w.api, "status.phase = 'Ready'") == 6 })
	waitRollout(t, w.api, stream, time.Minute, "4.16.2 everywhere", completeAt("4.16.2"))

	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", ""))
	waitRollout(t, w.api, stream, 30*time.Second, "one cluster upgraded", func(r *rollout.Report) bool {
		return r.Rollout.Release == "4.16.3" && r.Rollout.Stages[0].Upgraded >= 1
	})
	patchStream(t, w.api, *stream, `{"spec":{"rollout":{"paused":true}}}`)
	waitRollout(t, w.api, stream, 10*time.Second, "paused", func(r *rollout.Report) bool {
		return r.Rollout.State == rollout.StatePaused && len(r.Rollout.Admitted) == 0
	})
	moved := func() int {
		n := 0
		for _, name := range fleetNames("c", 6) {
			if releaseImageOf(w.hostedCluster(t, name)) == cincinnatisim.PayloadFor("4.16.3", "amd64") {
				n++
			}
		}
		return n
	}
	held := moved()
	time.Sleep(2 * time.Second) // several passes
	require.Equal(t, held, moved(), "no HostedCluster is given the release while the rollout is paused")
	require.Less(t, held, 6)

	patchStream(t, w.api, *stream, `{"spec":{"rollout":{"paused":false}}}`)
	waitRollout(t, w.api, stream, time.Minute, "4.16.3 rolled out", completeAt("4.16.3"))
}

// currentVersionOf is the version the applier last reported the cluster runs.
func currentVersionOf(tb testing.TB, s *apiServer, c *api.Cluster) string {
	tb.Helper()
	st := applierReport(tb, s, c)
	if st == nil {
		return ""
	}
	v, _ := st.Data[hostedcluster.DataCurrentVersion].(string)
	return v
}

// BenchmarkStagedRollout1000Clusters measures a staged rollout over 1,000 clusters in three stages (10 canaries,
// 90 early, 900 others, half of each stage at once, no soak) with hypershift-sim at zero delay: the time from a
// release's publication to the whole fleet running it, and the API requests the version resolver and the applier
// made for it, per cluster. Run it once:
//
//	go test ./test/integration -run '^$' -bench StagedRollout1000Clusters -benchtime 1x
func BenchmarkStagedRollout1000Clusters(b *testing.B) {
	for range b.N {
		var resolver *versionresolver.Adapter
		w := startApplierWorldWith(b, worldOptions{delay: 0, resolver: &resolver})
		applier := w.startApplier(b, nil, nil)
		stream := createStreamJSON(b, w.api, "fleet", `{"target_version":"4.16","rollout":{"stages":[
			{"name":"canary","selector":"stage=canary","max_at_once":"50%"},
			{"name":"early","selector":"stage=early","max_at_once":"50%"},
			{"name":"rest","max_at_once":"50%"}]}}`)
		waitForReport(b, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
		createFleet(b, w.api, "canary", "fleet", 10, map[string]string{"stage": "canary"})
		createFleet(b, w.api, "early", "fleet", 90, map[string]string{"stage": "early"})
		createFleet(b, w.api, "rest", "fleet", 900, nil)
		waitWithin(b, 10*time.Minute, "1000 clusters Ready", func() bool { return countClusters(b, w.api, "status.phase = 'Ready'") == 1000 })
		waitRollout(b, w.api, stream, 2*time.Minute, "4.16.2 everywhere", completeAt("4.16.2"))

		resolverBefore, applierBefore := countsOf(b, resolver.OpsAddr()), countsOf(b, applier.OpsAddr())
		applierOps := requestsByOp(b, applier.OpsAddr(), nil)
		start := time.Now()
		require.NoError(b, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", ""))
		waitRollout(b, w.api, stream, 10*time.Minute, "4.16.3 rolled out", completeAt("4.16.3"))
		took := time.Since(start)
		resolverAfter, applierAfter := countsOf(b, resolver.OpsAddr()), countsOf(b, applier.OpsAddr())
		requests := func(before, after adapterCounts) float64 {
			return after.sourceRequests + after.reconcileRequests - before.sourceRequests - before.reconcileRequests
		}
		b.ReportMetric(took.Seconds(), "s-publish-to-fleet-upgraded")
		b.ReportMetric(requests(resolverBefore, resolverAfter)/1000, "resolver-api-requests/cluster")
		b.ReportMetric(requests(applierBefore, applierAfter)/1000, "applier-api-requests/cluster")
		b.ReportMetric(resolverAfter.reconciles-resolverBefore.reconciles, "rollout-passes")
		b.ReportMetric((applierAfter.reconciles-applierBefore.reconciles)/1000, "applier-reconciles/cluster")
		b.Logf("applier API requests by operation during the rollout: %v", requestsByOp(b, applier.OpsAddr(), applierOps))
	}
}

// requestsByOp reads an adapter's API requests per operation from its metrics, less those of before.
func requestsByOp(tb testing.TB, ops string, before map[string]float64) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(scrape(tb, "http://"+ops+"/metrics"), "\n") {
		if !strings.HasPrefix(line, "hyperfleet_adapter_api_requests_total{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `op="`)
		op, _, _ := strings.Cut(rest, `"`)
		var v float64
		_, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
		require.NoError(tb, err)
		out[op] += v
	}
	for op, v := range before {
		out[op] -= v
	}
	return out
}
