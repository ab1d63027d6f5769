package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// postRolloutReport posts, as the version resolver, a stream report holding r. The Available message names the
// rollout's revision (as the resolver's does) so that the applier's dependents source sees the report move.
func postRolloutReport(tb testing.TB, s *apiServer, stream *api.VersionStream, r *rollout.Report) {
	tb.Helper()
	data, err := r.Data()
	require.NoError(tb, err)
	message := "resolves to " + r.ResolvedVersion
	if r.Rollout != nil {
		message += ", rollout revision " + time.Now().Format(time.RFC3339Nano)
	}
	available := cond("Available", "True", "Resolved")
	available.Message = &message
	rep := report(versionresolver.Name, stream.Generation, time.Now(), available)
	rep.Data = &data
	resp, err := s.PostVersionStreamStatusWithResponse(ctxFor(tb), stream.Id, rep)
	require.NoError(tb, err)
	require.Contains(tb, []int{http.StatusCreated, http.StatusOK}, resp.StatusCode(), "body: %s", resp.Body)
}

// applierCondition returns the applier's condition typ on the cluster, or the zero Condition.
func applierCondition(tb testing.TB, s *apiServer, c *api.Cluster, typ string) api.Condition {
	tb.Helper()
	st := applierReport(tb, s, c)
	if st == nil {
		return api.Condition{}
	}
	if got := condition(st, typ); got != nil {
		return *got
	}
	return api.Condition{}
}

func waitForVersion(tb testing.TB, s *apiServer, c *api.Cluster, version string) {
	tb.Helper()
	eventually(tb, c.Name+" runs "+version, func() bool {
		st := applierReport(tb, s, c)
		return st != nil && st.Data[hostedcluster.DataCurrentVersion] == version && st.Data[hostedcluster.DataUpgradeState] == "Completed"
	})
}

// The applier applies the stream's rollout as the version resolver reports it (posted here by hand, so that the
// test decides the rollout): a new cluster installs the stream's install release, not its target; an admitted
// cluster moves; one that is not admitted keeps its image and says it waits for an earlier stage (the stream's
// spec.rollout stages pick it by its labels); one whose only way forward is a conditional edge stays, blocked, with
// the risk's URL, unless its spec accepts the risk.
func TestApplierFollowsTheStreamsRollout(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}, "cluster": {hostedcluster.Name}})
	w := startManagementCluster(t, s, nil, worldOptions{delay: 300 * time.Millisecond})
	w.startApplier(t, nil, nil)
	stream := createStream(t, s, "staged", api.VersionStreamSpec{TargetVersion: "4.16", Rollout: &api.RolloutPolicy{
		Stages: &[]api.RolloutStage{{Name: "canary", Selector: ptr("tier=canary")}, {Name: "rest"}}}})
	image := func(v string) string { return cincinnatisim.PayloadFor(v, "amd64") }
	const risk, riskURL = "AROBrokenDNS", "https://issues.redhat.com/browse/ARO-1"
	risks := map[string]rollout.Risk{risk: {URL: riskURL, Message: "DNS breaks"}}

	// A stream resolved before rollouts: the risky cluster installs 4.16.0.
	postRolloutReport(t, s, stream, &rollout.Report{ReleaseImage: image("4.16.0"), ResolvedVersion: "4.16.0"})
	risky := createClusterNamed(t, s, "risky", "staged", nil)
	accepting := createClusterWith(t, s, "accepting", nil, api.ClusterSpec{VersionStream: "staged", AcceptedRisks: &[]string{risk},
		HostedCluster: clusterSpec("staged").HostedCluster})
	waitForVersion(t, s, risky, "4.16.0")
	waitForVersion(t, s, accepting, "4.16.0")

	// 4.16.1 is reached from 4.16.0 only through a conditional edge nobody accepted.
	postRolloutReport(t, s, stream, &rollout.Report{ReleaseImage: image("4.16.1"), ResolvedVersion: "4.16.1",
		InstallImage: image("4.16.1"), InstallVersion: "4.16.1",
		Graph: &rollout.Graph{Target: "4.16.1", Releases: map[string]string{"4.16.0": image("4.16.0"), "4.16.1": image("4.16.1")},
			Paths: map[string]rollout.Hops{"4.16.1": {}, "4.16.0": {Conditional: []rollout.ConditionalHop{{To: "4.16.1", Risks: []string{risk}}}}},
			Risks: risks},
		Rollout: &rollout.Status{Release: "4.16.1", State: rollout.StateComplete, Revision: 1,
			Stages: []rollout.StageStatus{{Name: "canary", State: rollout.StageComplete}, {Name: "rest", State: rollout.StageComplete}}}})
	eventually(t, "risky says it is blocked by the risk, with its URL", func() bool {
		c := applierCondition(t, s, risky, hostedcluster.ConditionUpgradeBlocked)
		return c.Status == api.ConditionStatusTrue && deref(c.Reason) == rollout.BlockedRiskNotAccepted && strings.Contains(deref(c.Message), riskURL)
	})
	require.Equal(t, image("4.16.0"), releaseImageOf(w.hostedCluster(t, "risky")), "a blocked cluster keeps its release")
	require.Equal(t, rollout.BlockedRiskNotAccepted, applierReport(t, s, risky).Data[hostedcluster.DataHeldReason])

	mover := createClusterWith(t, s, "mover", map[string]string{"tier": "canary"}, clusterSpec("staged"))
	waiter := createClusterNamed(t, s, "waiter", "staged", nil)
	waitForVersion(t, s, mover, "4.16.1")
	waitForVersion(t, s, waiter, "4.16.1")

	// 4.16.2 is out and rolling: the rollout admitted mover in the canary stage; the rest wait for it. New
	// clusters still install 4.16.1.
	postRolloutReport(t, s, stream, &rollout.Report{ReleaseImage: image("4.16.2"), ResolvedVersion: "4.16.2",
		InstallImage: image("4.16.1"), InstallVersion: "4.16.1",
		Graph: &rollout.Graph{Target: "4.16.2",
			Releases: map[string]string{"4.16.0": image("4.16.0"), "4.16.1": image("4.16.1"), "4.16.2": image("4.16.2")},
			Paths: map[string]rollout.Hops{"4.16.2": {}, "4.16.1": {To: "4.16.2"},
				"4.16.0": {Conditional: []rollout.ConditionalHop{{To: "4.16.2", Risks: []string{risk}}}}},
			Risks: risks},
		Rollout: &rollout.Status{Release: "4.16.2", Baseline: "4.16.1", State: rollout.StateProgressing, Revision: 2,
			Stages: []rollout.StageStatus{{Name: "canary", State: rollout.StageActive, Clusters: 1, InProgress: 1},
				{Name: "rest", State: rollout.StageWaiting, Clusters: 3}},
			Admitted: map[string]rollout.Admission{mover.Id.String(): {Version: "4.16.2", Admitted: time.Now()}}}})
	waitForVersion(t, s, mover, "4.16.2")
	require.Equal(t, "4.16.2", w.hostedCluster(t, "mover").GetAnnotations()[hostedcluster.AnnotationReleaseVersion],
		"the version annotation goes with the image")
	eventually(t, "waiter says it waits for the earlier stage", func() bool {
		c := applierCondition(t, s, waiter, hostedcluster.ConditionUpgradePending)
		return c.Status == api.ConditionStatusTrue && deref(c.Reason) == rollout.HeldWaitingForStage
	})
	st := applierReport(t, s, waiter)
	require.Equal(t, rollout.HeldWaitingForStage, st.Data[hostedcluster.DataHeldReason])
	require.Equal(t, "4.16.2", st.Data[hostedcluster.DataTargetVersion])
	require.Equal(t, image("4.16.2"), st.Data[hostedcluster.DataDesiredReleaseImage])
	require.Equal(t, image("4.16.1"), releaseImageOf(w.hostedCluster(t, "waiter")), "a cluster not admitted keeps its release")
	require.Equal(t, "4.16.1", w.hostedCluster(t, "waiter").GetAnnotations()[hostedcluster.AnnotationReleaseVersion])
	require.Equal(t, image("4.16.0"), releaseImageOf(w.hostedCluster(t, "risky")))
	eventually(t, "accepting, whose path the accepted risk opens, waits for the canary too", func() bool {
		blocked := applierCondition(t, s, accepting, hostedcluster.ConditionUpgradeBlocked)
		pending := applierCondition(t, s, accepting, hostedcluster.ConditionUpgradePending)
		return blocked.Status == api.ConditionStatusFalse && deref(pending.Reason) == rollout.HeldWaitingForStage
	})
	require.Equal(t, image("4.16.0"), releaseImageOf(w.hostedCluster(t, "accepting")))

	late := createClusterNamed(t, s, "late", "staged", nil)
	waitForVersion(t, s, late, "4.16.1")
	require.Equal(t, image("4.16.1"), releaseImageOf(w.hostedCluster(t, "late")), "a new cluster installs the install release, not the target in its canary")
}

func createClusterWith(tb testing.TB, s *apiServer, name string, labels map[string]string, spec api.ClusterSpec) *api.Cluster {
	tb.Helper()
	create := api.ClusterCreate{Name: name, Spec: spec}
	if labels != nil {
		l := api.Labels(labels)
		create.Labels = &l
	}
	resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, create)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}
