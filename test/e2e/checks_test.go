package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

func (s *system) devices(t *testing.T) []hivelocitysim.DeviceState {
	t.Helper()
	var out []hivelocitysim.DeviceState
	getJSON(t, "http://"+s.addrs.hivelocity+"/_sim/devices", &out)
	return out
}

func (s *system) simRequests(t *testing.T) []hivelocitysim.Request {
	t.Helper()
	var out []hivelocitysim.Request
	getJSON(t, "http://"+s.addrs.hivelocity+"/_sim/requests", &out)
	return out
}

// owned returns the devices carrying the pool's tag.
func owned(devices []hivelocitysim.DeviceState, poolID string) []hivelocitysim.DeviceState {
	var out []hivelocitysim.DeviceState
	for _, d := range devices {
		if slices.Contains(d.Tags, hivelocity.KeyNodePool+"="+poolID) {
			out = append(out, d)
		}
	}
	return out
}

// checkDevicesExactlyOnce checks the simulator's state and request log: no device is in two pools, none was
// reloaded for two pools or twice for one (outside its release wipe), and none got a claim after it was reloaded
// for the pool that won it. The e2e never gives a released device to another pool, so the rules hold over the run.
func (s *system) checkDevicesExactlyOnce(t *testing.T) {
	t.Helper()
	for _, d := range s.devices(t) {
		var pools []string
		for _, tag := range d.Tags {
			if v, ok := strings.CutPrefix(tag, hivelocity.KeyNodePool+"="); ok {
				pools = append(pools, v)
			}
		}
		require.LessOrEqual(t, len(pools), 1, "device %d is in pools %v", d.ID, pools)
	}
	requests := s.simRequests(t)
	reloadedFor := map[int32]map[string]int{}
	firstReload := map[int32]int64{}
	for _, r := range requests {
		if r.Op != hivelocitysim.OpReloadDevice || r.Reload == nil || !r.Reload.Started || strings.HasPrefix(r.Reload.Hostname, "spare-") {
			continue // refused, or the wipe that releases a device
		}
		for _, tag := range r.Reload.Tags {
			if v, ok := strings.CutPrefix(tag, hivelocity.KeyNodePool+"="); ok {
				if reloadedFor[r.DeviceID] == nil {
					reloadedFor[r.DeviceID] = map[string]int{}
					firstReload[r.DeviceID] = r.Seq
				}
				reloadedFor[r.DeviceID][v]++
			}
		}
	}
	for id, pools := range reloadedFor {
		require.Len(t, pools, 1, "device %d was reloaded for two pools: %v", id, pools)
		for pool, n := range pools {
			require.Equal(t, 1, n, "device %d was provisioned %d times for pool %s", id, n, pool)
		}
	}
	// A claim written after a device's reload is a takeover by its own pool (a replica re-provisioning or releasing
	// a device whose claim it did not win renews it first): it must name that pool, never another.
	for _, w := range requests {
		first, ok := firstReload[w.DeviceID]
		if w.Op != hivelocitysim.OpPutTags || !ok || w.Seq < first || !slices.ContainsFunc(w.Tags, func(tag string) bool {
			return strings.HasPrefix(tag, hivelocity.KeyClaim+"=")
		}) {
			continue
		}
		for pool := range reloadedFor[w.DeviceID] {
			require.Contains(t, w.Tags, hivelocity.KeyNodePool+"="+pool,
				"device %d got a claim (%v) for another pool after it was reloaded for pool %s", w.DeviceID, w.Tags, pool)
		}
	}
}

// managementClusters are the ones `hyperfleet-dev up` runs, by the names of their kubeconfigs in the dev dir.
var managementClusters = []string{"mc-a", "mc-b"}

// hostedClusters returns the cluster-id label of every HostedCluster on every management cluster, one entry per
// object: a cluster's HostedCluster on two of them would show twice.
func (s *system) hostedClusters(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, mc := range managementClusters {
		ids = append(ids, s.hostedClustersOn(t, mc)...)
	}
	return ids
}

// hostedClustersOn returns the cluster-id label of every HostedCluster on one management cluster.
func (s *system) hostedClustersOn(t *testing.T, mc string) []string {
	t.Helper()
	kubeconfig, err := os.ReadFile(filepath.Join(s.devDir, "management-clusters", mc))
	require.NoError(t, err)
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	require.NoError(t, err)
	client, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := client.Resource(kubeenv.HostedClusters()).Namespace("clusters").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var ids []string
	for _, hc := range list.Items {
		ids = append(ids, hc.GetLabels()[hostedcluster.LabelClusterID])
	}
	return ids
}

// checkHostedClusters requires exactly one HostedCluster per live cluster and no other.
func (s *system) checkHostedClusters(t *testing.T, live ...uuid.UUID) {
	t.Helper()
	want := make([]string, 0, len(live))
	for _, id := range live {
		want = append(want, id.String())
	}
	require.ElementsMatch(t, want, s.hostedClusters(t), "HostedClusters by cluster id")
}

// checkReported requires the resource Ready and each of its required adapters' latest report at its current
// generation with Available=True: the last word of every adapter made it into the API.
func checkReported(t *testing.T, kind string, generation int64, phase api.ResourceStatusPhase, reports []api.AdapterStatus, adapter string) {
	t.Helper()
	require.Equal(t, api.ResourceStatusPhase("Ready"), phase, "%s phase", kind)
	var got []api.AdapterStatus
	for _, r := range reports {
		if r.Adapter == adapter {
			got = append(got, r)
		}
	}
	require.Len(t, got, 1, "%s: reports of %s", kind, adapter)
	require.Equal(t, generation, got[0].ObservedGeneration, "%s: %s's report is of the current generation", kind, adapter)
	require.True(t, slices.ContainsFunc(got[0].Conditions, func(c api.Condition) bool {
		return c.Type == "Available" && c.Status == api.ConditionStatusTrue
	}), "%s: %s reports Available=True", kind, adapter)
}

// checkLoop checks a converged cluster, its pool and its stream: all Ready with the required adapters' reports at
// their generations, the pool's report listing exactly the devices the simulator shows in it, ready.
func (s *system) checkLoop(t *testing.T, streamID, clusterID, poolID uuid.UUID) {
	t.Helper()
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	stream, err := c.GetVersionStreamWithResponse(ctx, streamID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, stream.StatusCode())
	streamReports, err := c.ListVersionStreamStatusesWithResponse(ctx, streamID)
	require.NoError(t, err)
	checkReported(t, "VersionStream", stream.JSON200.Generation, stream.JSON200.Status.Phase, streamReports.JSON200.Items, versionresolver.Name)

	cluster, err := c.GetClusterWithResponse(ctx, clusterID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cluster.StatusCode())
	clusterReports, err := c.ListClusterStatusesWithResponse(ctx, clusterID)
	require.NoError(t, err)
	checkReported(t, "Cluster", cluster.JSON200.Generation, cluster.JSON200.Status.Phase, clusterReports.JSON200.Items, hostedcluster.Name)
	checkReported(t, "Cluster", cluster.JSON200.Generation, cluster.JSON200.Status.Phase, clusterReports.JSON200.Items, placer)
	// The HostedCluster is on the management cluster the placer reported, and on no other.
	var on string
	for _, r := range clusterReports.JSON200.Items {
		if r.Adapter == placer {
			on, _ = r.Data["management_cluster"].(string)
		}
	}
	require.Contains(t, managementClusters, on, "the placer's data.management_cluster")
	for _, mc := range managementClusters {
		require.Equal(t, mc == on, slices.Contains(s.hostedClustersOn(t, mc), clusterID.String()),
			"cluster placed on %s: its HostedCluster on %s", on, mc)
	}

	pool, err := c.GetNodePoolWithResponse(ctx, clusterID, poolID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pool.StatusCode())
	poolReports, err := c.ListNodePoolStatusesWithResponse(ctx, clusterID, poolID)
	require.NoError(t, err)
	checkReported(t, "NodePool", pool.JSON200.Generation, pool.JSON200.Status.Phase, poolReports.JSON200.Items, hivelocity.Name)

	var reported []int32
	for _, r := range poolReports.JSON200.Items {
		if r.Adapter != hivelocity.Name {
			continue
		}
		devices, _ := r.Data["devices"].([]any)
		for _, d := range devices {
			m, _ := d.(map[string]any)
			require.Equal(t, "ready", m["state"], "device %v", m["device_id"])
			id, _ := m["device_id"].(float64)
			reported = append(reported, int32(id))
		}
	}
	var inSim []int32
	for _, d := range owned(s.devices(t), poolID.String()) {
		require.False(t, d.IsReload, "device %d", d.ID)
		inSim = append(inSim, d.ID)
	}
	require.ElementsMatch(t, inSim, reported, "the pool's report names the devices the simulator shows in it")
	require.Len(t, inSim, pool.JSON200.Spec.Replicas)
}
