package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// patchCluster merges patch into a cluster and returns it as stored.
func patchCluster(tb testing.TB, s *apiServer, c *api.Cluster, patch string) *api.Cluster {
	tb.Helper()
	resp, err := s.PatchClusterWithBodyWithResponse(ctxFor(tb), c.Id, nil, "application/merge-patch+json", strings.NewReader(patch))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

// pausedAt reports whether st is a paused report at generation: the adapter has seen that generation and held.
func pausedAt(st *api.AdapterStatus, generation int64) bool {
	return st != nil && st.ObservedGeneration == generation &&
		conditionIs(st, conditions.Paused, "True", conditions.ReasonPaused) &&
		conditionIs(st, conditions.Applied, "False", conditions.ReasonPaused)
}

// A paused cluster's HostedCluster is left exactly as it was while its own spec changes and its stream moves to
// a new release; the applier keeps reporting (Paused=True, the last known version), the cluster stays Ready; once
// unpaused it converges on the spec and release of that moment.
func TestApplierLeavesAPausedClusterAlone(t *testing.T) {
	w := startApplierWorld(t)
	// Every re-check posts its report, even one that says what the last said, so that the test sees the applier
	// look at the cluster again when its stream moves (the report's observed time).
	w.startApplier(t, func(c *adapter.Config) { c.ReportHeartbeat = 0 }, nil)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	c := createClusterNamed(t, w.api, "held", "ocp-4-16", nil)
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)

	paused := patchCluster(t, w.api, c, `{"spec":{"paused":true}}`)
	require.True(t, deref(paused.Spec.Paused))
	eventually(t, "the applier reports the pause", func() bool { return pausedAt(applierReport(t, w.api, c), paused.Generation) })
	before := w.hostedCluster(t, "held")
	require.NotNil(t, before)

	// The cluster's spec changes and its stream moves on while it is paused.
	changed := patchCluster(t, w.api, c, `{"spec":{"hosted_cluster":{"node_selector":{"role":"infra"}}}}`)
	require.Greater(t, changed.Generation, paused.Generation)
	var held *api.AdapterStatus
	eventually(t, "the applier saw the changed spec and held", func() bool {
		held = applierReport(t, w.api, c)
		return pausedAt(held, changed.Generation)
	})
	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	moved := waitForReport(t, w.api, *stream, "4.16.3", resolvedTo("4.16.3"))
	// The stream's change re-queues the cluster (a dependent): a report newer than the stream's proves the applier
	// looked at the cluster again with the new release known.
	eventually(t, "the applier looked again after the stream moved", func() bool {
		held = applierReport(t, w.api, c)
		return pausedAt(held, changed.Generation) && held.ObservedTime.After(moved.ObservedTime)
	})
	after := w.hostedCluster(t, "held")
	require.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "a paused cluster's HostedCluster is not written")
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), releaseImageOf(after))
	_, found, _ := unstructured.NestedMap(after.Object, "spec", "nodeSelector")
	require.False(t, found, "the paused spec change is not applied")
	require.Equal(t, "4.16.2", held.Data[hostedcluster.DataCurrentVersion], "the last known version is still reported")
	require.True(t, conditionIs(held, "Available", "True", deref(condition(held, "Available").Reason)))
	got := getCluster(t, w.api, c)
	require.Equal(t, api.ResourceStatusPhaseReady, got.Status.Phase, "pausing does not make a cluster un-Ready")

	// Unpaused, it converges on what the spec and the stream say now.
	resumed := patchCluster(t, w.api, c, `{"spec":{"paused":false}}`)
	eventually(t, "the cluster rolled to 4.16.3 with the new spec", func() bool {
		st := applierReport(t, w.api, c)
		hc := w.hostedCluster(t, "held")
		selector, _, _ := unstructured.NestedStringMap(hc.Object, "spec", "nodeSelector")
		return st != nil && st.ObservedGeneration == resumed.Generation && condition(st, conditions.Paused) == nil &&
			st.Data[hostedcluster.DataCurrentVersion] == "4.16.3" && selector["role"] == "infra"
	})
	require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), releaseImageOf(w.hostedCluster(t, "held")))
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
}

// A paused pool's devices are neither reloaded (a spec change), nor claimed (more replicas), nor released (fewer)
// while it is paused; the provisioner keeps reporting the devices it last knew. Unpaused, the pool converges on
// its spec of that moment.
func TestHivelocityLeavesAPausedPoolAlone(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 4)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "held", poolSpec(2, "#v1\n"))
	ready := reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	specV1, _ := ready.Data[hivelocity.DataSpec].(string)
	require.Equal(t, 2, readyDevices(sim, p.Id.String(), specV1))

	patchPool(t, s, p, `{"spec":{"paused":true}}`)
	pausedGen := getPool(t, s, p).Generation
	waitFor(t, "the provisioner reports the pause", func() bool { return pausedAt(poolReport(t, s, p), pausedGen) })
	// Counted once the pause is reported: a reconcile that began before it has finished by then (one key is never
	// reconciled twice at once), and every later one sees the pause.
	reloads := len(startedReloads(sim))
	requests := len(sim.Requests())
	patchPool(t, s, p, `{"spec":{"replicas":3,"platform":{"hivelocity":{"userdata":"#v2\n"}}}}`)
	generation := getPool(t, s, p).Generation
	var held *api.AdapterStatus
	waitFor(t, "the provisioner saw the changed spec and held", func() bool {
		held = poolReport(t, s, p)
		return pausedAt(held, generation)
	})
	require.Equal(t, specV1, held.Data[hivelocity.DataSpec], "the report still says what the devices run")
	require.True(t, conditionIs(held, "Available", "True", hivelocity.ReasonAllDevicesReady))
	require.Len(t, startedReloads(sim), reloads, "no device reloaded while paused")
	require.Equal(t, requests, len(sim.Requests()), "the provisioner sent Hivelocity nothing while paused")
	require.Len(t, owned(sim, p.Id.String()), 2, "no device claimed while paused")
	require.Equal(t, 2, readyDevices(sim, p.Id.String(), specV1))
	require.Equal(t, api.ResourceStatusPhaseReady, getPool(t, s, p).Status.Phase)

	patchPool(t, s, p, `{"spec":{"paused":false}}`)
	waitFor(t, "three devices on the new spec", func() bool {
		st := poolReport(t, s, p)
		spec, _ := st.Data[hivelocity.DataSpec].(string)
		return condition(st, conditions.Paused) == nil && spec != specV1 && readyDevices(sim, p.Id.String(), spec) == 3 &&
			conditionIs(st, "Available", "True", hivelocity.ReasonAllDevicesReady)
	})
}

// getPool returns a node pool as stored.
func getPool(tb testing.TB, s *apiServer, p *api.NodePool) *api.NodePool {
	tb.Helper()
	resp, err := s.GetNodePoolWithResponse(ctxFor(tb), p.OwnerReferences.Id, p.Id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}
