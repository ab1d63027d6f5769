package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/adapters/placement"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// fleetNamespace is where every management cluster of a fleet world keeps its HostedClusters (the kind's default).
const fleetNamespace = "clusters"

// placementWorld is the placement loop on one machine: the API requiring the placer and the applier on clusters and
// the applier on management clusters, the version resolver on a Cincinnati simulator, and any number of
// management clusters, each a real kube-apiserver with HyperShift's CRDs and its own hypershift-sim, reached
// through the applier's credentials directory.
type placementWorld struct {
	api     *apiServer
	sim     *simServer
	creds   string // the applier's --management-cluster-credentials
	pull    string
	members map[string]*placementMember
}

// placementMember is one management cluster of a fleet world.
type placementMember struct {
	env *kubeenv.Env
	// proxy stands between the applier and the kube-apiserver when the member was added behind one; closing it
	// makes the management cluster unreachable.
	proxy *cuttableProxy
	// down is set once the test has cut the proxy: the management cluster is unreachable.
	down bool
}

func startPlacementWorld(tb testing.TB) *placementWorld {
	tb.Helper()
	s := startServerWith(tb, map[string][]string{"versionstream": {versionresolver.Name},
		"cluster": {placement.Name, hostedcluster.Name}, "managementcluster": {hostedcluster.Name}})
	sim := startSim(tb, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3})
	startResolver(tb, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: 200 * time.Millisecond, RetryAfter: 200 * time.Millisecond, RolloutInterval: 200 * time.Millisecond,
		Applier: hostedcluster.Name})
	w := &placementWorld{api: s, sim: sim, creds: tb.TempDir(), pull: filepath.Join(tb.TempDir(), "pull-secret.json"),
		members: map[string]*placementMember{}}
	require.NoError(tb, os.WriteFile(w.pull, []byte(`{"auths":{}}`), 0o600))
	return w
}

// addManagementCluster starts a management cluster (startManagementCluster) and registers it with the API.
func (w *placementWorld) addManagementCluster(tb testing.TB, name string, capacity int, proxied bool) *placementMember {
	tb.Helper()
	m := w.startManagementCluster(tb, name, proxied)
	createMC(tb, w.api, name, capacity, mcOptions{})
	return m
}

// startManagementCluster starts a kube-apiserver with hypershift-sim and writes its kubeconfig into the
// credentials directory under name (through a proxy when proxied). Start every management cluster before the
// applier: the test's end then stops the applier, and its watches, before the kube-apiservers they watch.
func (w *placementWorld) startManagementCluster(tb testing.TB, name string, proxied bool) *placementMember {
	tb.Helper()
	env := kubeenv.Start(tb)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": fleetNamespace}}}
	_, err := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctxFor(tb), ns, metav1.CreateOptions{})
	require.NoError(tb, err)
	hs := hypershiftsim.New(env.Dynamic, hypershiftsim.Options{Namespace: fleetNamespace, Delay: 100 * time.Millisecond,
		DeletionDelay: 100 * time.Millisecond, CreateSecrets: true, Logger: testLogger()})
	runInBackground(tb, hs.Run)
	m := &placementMember{env: env}
	kubeconfig := env.Kubeconfig
	if proxied {
		m.proxy = startCuttableProxy(tb, env.Config.Host)
		cfg, err := clientcmd.Load(kubeconfig)
		require.NoError(tb, err)
		for _, c := range cfg.Clusters {
			c.Server = "https://" + m.proxy.addr()
		}
		kubeconfig, err = clientcmd.Write(*cfg)
		require.NoError(tb, err)
	}
	require.NoError(tb, os.WriteFile(filepath.Join(w.creds, name), kubeconfig, 0o600))
	w.members[name] = m
	return m
}

func (w *placementWorld) startApplier(tb testing.TB) *hostedcluster.Adapter {
	tb.Helper()
	a, err := hostedcluster.NewFleet(runtimeConfig(tb, w.api, hostedcluster.Name), hostedcluster.Options{
		CredentialsDir: w.creds, PullSecretFile: w.pull, ProgressInterval: time.Second, SyncTimeout: time.Minute,
		KubeQPS: 200, KubeBurst: 400}, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, a.Run)
	return a
}

// waitManagementClustersReady waits until the applier has reported every registered management cluster usable:
// until then the placer rightly passes over the ones it has not heard of, and a spread would start lopsided.
func (w *placementWorld) waitManagementClustersReady(tb testing.TB) {
	tb.Helper()
	waitWithin(tb, 2*time.Minute, "every management cluster Ready", func() bool {
		resp, err := w.api.ListManagementClustersWithResponse(ctxFor(tb), &api.ListManagementClustersParams{Size: ptr(500)})
		require.NoError(tb, err)
		for _, mc := range resp.JSON200.Items {
			if mc.Status.Phase != api.ResourceStatusPhaseReady {
				return false
			}
		}
		return len(resp.JSON200.Items) > 0
	})
}

func (w *placementWorld) startPlacer(tb testing.TB) *placement.Adapter {
	tb.Helper()
	o := placement.DefaultOptions()
	o.RetryInterval, o.FinalizeInterval = 300*time.Millisecond, 300*time.Millisecond
	p, err := placement.New(runtimeConfig(tb, w.api, placement.Name), o, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, p.Run)
	return p
}

// createClusters creates count clusters named prefix-NN at once.
func (w *placementWorld) createClusters(tb testing.TB, prefix string, from, count int) {
	tb.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for i := from; i < from+count; i++ {
		g.Go(func() error {
			resp, err := w.api.CreateClusterWithResponse(ctxFor(tb), nil, api.ClusterCreate{Name: fmt.Sprintf("%s-%03d", prefix, i), Spec: clusterSpec(defaultStream)})
			if err == nil && resp.StatusCode() != http.StatusCreated {
				err = fmt.Errorf("create %s-%03d: %d %s", prefix, i, resp.StatusCode(), resp.Body)
			}
			return err
		})
	}
	require.NoError(tb, g.Wait())
}

// placedCluster is a cluster with the placer's and the applier's reports.
type placedCluster struct {
	cluster           api.Cluster
	placer, applier   *api.AdapterStatus
	managementCluster string // where the placer placed it, "" while it is not placed
}

// clusters lists every live cluster with both adapters' reports.
func (w *placementWorld) clusters(tb testing.TB) map[string]placedCluster {
	tb.Helper()
	out := map[string]placedCluster{}
	var after *string
	for {
		resp, err := w.api.ListClustersWithResponse(ctxFor(tb), &api.ListClustersParams{Size: ptr(500), After: after,
			Statuses: ptr(placement.Name + "," + hostedcluster.Name)})
		require.NoError(tb, err)
		require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		for _, c := range resp.JSON200.Items {
			fc := placedCluster{cluster: c}
			for _, st := range deref(c.AdapterStatuses) {
				switch st.Adapter {
				case placement.Name:
					fc.placer = &st
					if mc, ok := st.Data["management_cluster"].(string); ok {
						fc.managementCluster = mc
					}
				case hostedcluster.Name:
					fc.applier = &st
				}
			}
			out[c.Name] = fc
		}
		if resp.JSON200.Next == nil {
			return out
		}
		after = resp.JSON200.Next
	}
}

// placedCounts returns how many clusters are placed on each management cluster, and how many wait for room.
func placedCounts(clusters map[string]placedCluster) (map[string]int, int) {
	counts, waiting := map[string]int{}, 0
	for _, c := range clusters {
		if c.managementCluster == "" {
			waiting++
			continue
		}
		counts[c.managementCluster]++
	}
	return counts, waiting
}

// waitAll waits up to d until every live cluster satisfies cond, and returns them then.
func (w *placementWorld) waitAll(tb testing.TB, d time.Duration, what string, want int, cond func(placedCluster) bool) map[string]placedCluster {
	tb.Helper()
	var last map[string]placedCluster
	waitWithin(tb, d, what, func() bool {
		last = w.clusters(tb)
		if len(last) != want {
			return false
		}
		for _, c := range last {
			if !cond(c) {
				return false
			}
		}
		return true
	})
	return last
}

func ready(c placedCluster) bool { return c.cluster.Status.Phase == api.ResourceStatusPhaseReady }

func noCapacity(c placedCluster) bool {
	return c.placer != nil && conditionIs(c.placer, "Placed", api.ConditionStatusFalse, "NoCapacity")
}

// hostedClusterOn reports whether the management cluster holds the HostedCluster of the cluster named name.
func (m *placementMember) hostedClusterOn(tb testing.TB, name string) bool {
	tb.Helper()
	_, err := m.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(fleetNamespace).Get(ctxFor(tb), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(tb, err)
	return true
}

// checkHostedWhereReported checks that each placed cluster's HostedCluster is on the management cluster its
// placement names and on no other.
func (w *placementWorld) checkHostedWhereReported(tb testing.TB, clusters map[string]placedCluster) {
	tb.Helper()
	for name, c := range clusters {
		for mc, m := range w.members {
			if m.down {
				continue
			}
			require.Equal(tb, mc == c.managementCluster, m.hostedClusterOn(tb, name),
				"cluster %s is placed on %q: its HostedCluster is there and nowhere else (looked on %s)", name, c.managementCluster, mc)
		}
	}
}

func (w *placementWorld) patchManagementCluster(tb testing.TB, name, patch string) {
	tb.Helper()
	mc := w.managementCluster(tb, name)
	resp, err := w.api.PatchManagementClusterWithBodyWithResponse(ctxFor(tb), mc.Id, nil, "application/merge-patch+json", strings.NewReader(patch))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
}

func (w *placementWorld) managementCluster(tb testing.TB, name string) api.ManagementCluster {
	tb.Helper()
	resp, err := w.api.ListManagementClustersWithResponse(ctxFor(tb), &api.ListManagementClustersParams{Search: ptr("name = '" + name + "'")})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Len(tb, resp.JSON200.Items, 1)
	return resp.JSON200.Items[0]
}

// TestFleetSpreadsByCapacityHonoursCordonAndFreesSlots: the spread, cordon and delete, on three real
// kube-apiservers of capacities 10, 20 and 30.
func TestFleetSpreadsByCapacityHonoursCordonAndFreesSlots(t *testing.T) {
	w := startPlacementWorld(t)
	for i, capacity := range []int{10, 20, 30} {
		w.addManagementCluster(t, fmt.Sprintf("mc-%c", 'a'+i), capacity, false)
	}
	w.startApplier(t)
	w.waitManagementClustersReady(t)
	w.startPlacer(t)

	// Half the fleet's room: each management cluster half full.
	w.createClusters(t, "spread", 0, 30)
	clusters := w.waitAll(t, 3*time.Minute, "30 clusters Ready", 30, ready)
	counts, _ := placedCounts(clusters)
	require.Equal(t, map[string]int{"mc-a": 5, "mc-b": 10, "mc-c": 15}, counts, "placed in proportion to capacity")
	w.checkHostedWhereReported(t, clusters)

	// Cordon mc-c, which has the most room: the next ten go to mc-a and mc-b only.
	w.patchManagementCluster(t, "mc-c", `{"spec": {"schedulable": false}}`)
	w.createClusters(t, "cordoned", 0, 10)
	clusters = w.waitAll(t, 3*time.Minute, "40 clusters Ready", 40, ready)
	counts, _ = placedCounts(clusters)
	require.Equal(t, 15, counts["mc-c"], "a cordoned management cluster gets none")
	require.Equal(t, 25, counts["mc-a"]+counts["mc-b"])

	// Uncordoned, the fleet fills up: 60 clusters land 10/20/30.
	w.patchManagementCluster(t, "mc-c", `{"spec": {"schedulable": true}}`)
	w.createClusters(t, "fill", 0, 20)
	clusters = w.waitAll(t, 3*time.Minute, "60 clusters Ready", 60, ready)
	counts, _ = placedCounts(clusters)
	require.Equal(t, map[string]int{"mc-a": 10, "mc-b": 20, "mc-c": 30}, counts, "60 clusters over 10/20/30")
	w.checkHostedWhereReported(t, clusters)

	// A 61st has no room and says so, with each management cluster's reason.
	w.createClusters(t, "extra", 0, 1)
	clusters = w.waitAll(t, time.Minute, "the 61st to report NoCapacity", 61, func(c placedCluster) bool {
		return c.cluster.Name != "extra-000" || noCapacity(c)
	})
	msg := deref(conditionNamed(t, clusters["extra-000"].placer, "Placed").Message)
	for _, want := range []string{"mc-a: full (10/10", "mc-b: full (20/20", "mc-c: full (30/30"} {
		require.Contains(t, msg, want)
	}

	// Deleting a cluster on mc-a removes its HostedCluster from mc-a, frees the slot, and the waiting one takes it.
	var victim placedCluster
	for _, c := range clusters {
		if c.managementCluster == "mc-a" {
			victim = c
			break
		}
	}
	del, err := w.api.DeleteClusterWithResponse(ctxFor(t), victim.cluster.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	clusters = w.waitAll(t, 3*time.Minute, "the waiting cluster placed where the deleted one was", 60, func(c placedCluster) bool {
		return c.cluster.Name != "extra-000" || (c.managementCluster == "mc-a" && ready(c))
	})
	require.False(t, w.members["mc-a"].hostedClusterOn(t, victim.cluster.Name), "the deleted cluster's HostedCluster is gone from mc-a")
	w.checkHostedWhereReported(t, clusters)

	// A management cluster that hosts clusters cannot be deleted.
	mc := w.managementCluster(t, "mc-b")
	resp, err := w.api.DeleteManagementClusterWithResponse(ctxFor(t), mc.Id)
	require.NoError(t, err)
	p := problem(t, resp.HTTPResponse, resp.Body, http.StatusConflict, "HYPERFLEET-CNF-005")
	require.Contains(t, deref(p.Detail), "still has 20 Cluster(s) on it")
}

// TestFleetNeverOvershootsAndSurvivesAnOutage: the no-overshoot and outage, on three real kube-apiservers.
func TestFleetNeverOvershootsAndSurvivesAnOutage(t *testing.T) {
	w := startPlacementWorld(t)
	w.addManagementCluster(t, "mc-a", 15, true)
	w.addManagementCluster(t, "mc-b", 25, false)
	w.startManagementCluster(t, "mc-c", false) // registered only once the first two are full
	w.startApplier(t)
	w.waitManagementClustersReady(t)
	w.startPlacer(t)

	// 50 creates at once against 40 free slots: exactly 40 placed, and 10 say why not.
	w.createClusters(t, "rush", 0, 50)
	clusters := w.waitAll(t, 3*time.Minute, "40 Ready and 10 NoCapacity", 50, func(c placedCluster) bool { return ready(c) || noCapacity(c) })
	counts, waiting := placedCounts(clusters)
	require.Equal(t, map[string]int{"mc-a": 15, "mc-b": 25}, counts, "never more than capacity")
	require.Equal(t, 10, waiting)
	w.checkHostedWhereReported(t, clusters)

	// Capacity appears: the ten are placed on the new management cluster.
	createMC(t, w.api, "mc-c", 20, mcOptions{})
	clusters = w.waitAll(t, 3*time.Minute, "all 50 Ready", 50, ready)
	counts, _ = placedCounts(clusters)
	require.Equal(t, map[string]int{"mc-a": 15, "mc-b": 25, "mc-c": 10}, counts)

	// mc-a goes away: its clusters say so, and the others still roll to a new release and stay Ready.
	w.members["mc-a"].proxy.cut()
	w.members["mc-a"].down = true
	w.waitAll(t, 2*time.Minute, "mc-a's clusters Unknown/ManagementClusterUnreachable", 50, func(c placedCluster) bool {
		return c.managementCluster != "mc-a" || (c.applier != nil && conditionIs(c.applier, "Available", api.ConditionStatusUnknown, "ManagementClusterUnreachable"))
	})
	require.NoError(t, w.sim.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	w.waitAll(t, 3*time.Minute, "the clusters on mc-b and mc-c at 4.16.3 and Ready", 50, func(c placedCluster) bool {
		if c.managementCluster == "mc-a" {
			return c.applier != nil && conditionIs(c.applier, "Available", api.ConditionStatusUnknown, "ManagementClusterUnreachable")
		}
		return ready(c) && c.applier != nil && c.applier.Data["current_version"] == "4.16.3"
	})
	waitWithin(t, time.Minute, "mc-a itself to report the outage", func() bool {
		return w.managementCluster(t, "mc-a").Status.Phase != api.ResourceStatusPhaseReady
	})

	// Back again, its clusters catch up with the release the others already run.
	w.members["mc-a"].proxy.restore()
	w.members["mc-a"].down = false
	clusters = w.waitAll(t, 3*time.Minute, "every cluster at 4.16.3 and Ready", 50, func(c placedCluster) bool {
		return ready(c) && c.applier != nil && c.applier.Data["current_version"] == "4.16.3"
	})
	w.checkHostedWhereReported(t, clusters)
}

// conditionNamed returns the report's condition of that type, failing if absent.
func conditionNamed(tb testing.TB, st *api.AdapterStatus, typ string) api.Condition {
	tb.Helper()
	require.NotNil(tb, st)
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	require.Failf(tb, "no condition", "the report of %s has no %s condition: %+v", st.Adapter, typ, st.Conditions)
	return api.Condition{}
}
