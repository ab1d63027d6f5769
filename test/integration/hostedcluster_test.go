package integration

import (
	"cmp"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// applierWorld is the whole loop of the applier on one machine: the API, the version resolver on a Cincinnati
// simulator, a real kube-apiserver with HyperShift's CRDs, and hypershift-sim standing in for the HyperShift
// operator.
type applierWorld struct {
	api       *apiServer
	cincinati *simServer
	env       *kubeenv.Env
	namespace string
	pull      string // the pull secret file
}

func startApplierWorld(tb testing.TB) *applierWorld {
	tb.Helper()
	return startApplierWorldIn(tb, "")
}

// startApplierWorldIn is startApplierWorld with the HostedClusters in namespace (created here), or in a fresh
// namespace of their own when it is empty.
func startApplierWorldIn(tb testing.TB, namespace string) *applierWorld {
	tb.Helper()
	return startApplierWorldWithDelay(tb, namespace, 300*time.Millisecond)
}

// startApplierWorldWithDelay is startApplierWorldIn with hypershift-sim taking delay per rollout.
func startApplierWorldWithDelay(tb testing.TB, namespace string, delay time.Duration) *applierWorld {
	tb.Helper()
	return startApplierWorldWith(tb, worldOptions{namespace: namespace, delay: delay})
}

// worldOptions tune an applier world.
type worldOptions struct {
	namespace string
	delay     time.Duration // hypershift-sim's per rollout
	// failures makes releases fail in hypershift-sim; nil fails none.
	failures *hypershiftsim.Failures
	// rolloutInterval is the version resolver's --rollout-interval; zero is 200 ms.
	rolloutInterval time.Duration
	// resolver keeps a handle on the version resolver (its ops address), when not nil.
	resolver **versionresolver.Adapter
}

func startApplierWorldWith(tb testing.TB, o worldOptions) *applierWorld {
	tb.Helper()
	s := startServerWith(tb, map[string][]string{"versionstream": {versionresolver.Name}, "cluster": {hostedcluster.Name}})
	sim := startSim(tb, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3})
	resolver := startResolver(tb, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: 200 * time.Millisecond, RetryAfter: 200 * time.Millisecond,
		RolloutInterval: cmp.Or(o.rolloutInterval, 200*time.Millisecond), Applier: hostedcluster.Name})
	if o.resolver != nil {
		*o.resolver = resolver
	}
	return startManagementCluster(tb, s, sim, o)
}

// startManagementCluster is the applier world's management side: a real kube-apiserver with HyperShift's CRDs and
// hypershift-sim as o says, beside the API s (and the Cincinnati simulator sim, if any).
func startManagementCluster(tb testing.TB, s *apiServer, sim *simServer, o worldOptions) *applierWorld {
	tb.Helper()
	env := kubeenv.Start(tb)
	namespace := o.namespace
	if namespace == "" {
		namespace = env.Namespace(tb, "clusters")
	} else {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
		_, err := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctxFor(tb), ns, metav1.CreateOptions{})
		require.NoError(tb, err)
	}
	w := &applierWorld{api: s, cincinati: sim, env: env, namespace: namespace,
		pull: filepath.Join(tb.TempDir(), "pull-secret.json")}
	require.NoError(tb, os.WriteFile(w.pull, []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`), 0o600))
	hs := hypershiftsim.New(env.Dynamic, hypershiftsim.Options{Namespace: w.namespace, Delay: o.delay,
		DeletionDelay: 200 * time.Millisecond, CreateSecrets: true, Failures: o.failures, Logger: testLogger()})
	runInBackground(tb, hs.Run)
	return w
}

// startApplier runs an applier replica against the world and returns its runner.
func (w *applierWorld) startApplier(tb testing.TB, tune func(*adapter.Config), kube *rest.Config) *hostedcluster.Adapter {
	tb.Helper()
	return w.startApplierWith(tb, tune, kube, time.Second)
}

// startApplierWith is startApplier with the applier's progress interval.
func (w *applierWorld) startApplierWith(tb testing.TB, tune func(*adapter.Config), kube *rest.Config, progress time.Duration) *hostedcluster.Adapter {
	tb.Helper()
	cfg := runtimeConfig(tb, w.api, hostedcluster.Name)
	if tune != nil {
		tune(&cfg)
	}
	if kube == nil {
		kube = w.env.Config
	}
	a, err := hostedcluster.New(cfg, hostedcluster.Options{Namespace: w.namespace, PullSecretFile: w.pull,
		ProgressInterval: progress, SyncTimeout: time.Minute}, kube, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, a.Run)
	return a
}

func (w *applierWorld) hostedCluster(tb testing.TB, name string) *unstructured.Unstructured {
	tb.Helper()
	hc, err := w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace).Get(ctxFor(tb), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return hc
}

func releaseImageOf(hc *unstructured.Unstructured) string {
	image, _, _ := unstructured.NestedString(hc.Object, "spec", "release", "image")
	return image
}

func createClusterNamed(tb testing.TB, s *apiServer, name, stream string, schedule *string) *api.Cluster {
	tb.Helper()
	spec := clusterSpec(stream)
	spec.UpgradeSchedule = schedule
	resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, api.ClusterCreate{Name: name, Spec: spec})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

func applierReport(tb testing.TB, s *apiServer, c *api.Cluster) *api.AdapterStatus {
	tb.Helper()
	resp, err := s.ListClusterStatusesWithResponse(ctxFor(tb), c.Id)
	require.NoError(tb, err)
	if resp.JSON200 == nil {
		return nil
	}
	for i := range resp.JSON200.Items {
		if st := &resp.JSON200.Items[i]; st.Adapter == hostedcluster.Name && st.ObservedGeneration > 0 {
			return st
		}
	}
	return nil
}

func waitForPhase(tb testing.TB, s *apiServer, c *api.Cluster, phase api.ResourceStatusPhase) *api.Cluster {
	tb.Helper()
	var got *api.Cluster
	eventually(tb, "cluster "+c.Name+" "+string(phase), func() bool {
		resp, err := s.GetClusterWithResponse(ctxFor(tb), c.Id)
		require.NoError(tb, err)
		got = resp.JSON200
		return got != nil && got.Status.Phase == phase
	})
	return got
}

// A cluster becomes a HostedCluster pinned to its stream's resolved image, with its UUID and label, HyperShift
// makes it Available, and the cluster is Ready; a new patch in Cincinnati rolls it; deleting it deletes the
// HostedCluster and, once HyperShift's finalizer has run, the cluster.
func TestApplierCreatesRollsAndDeletesHostedClusters(t *testing.T) {
	w := startApplierWorld(t)
	applier := w.startApplier(t, nil, nil)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))

	c := createClusterNamed(t, w.api, "prod-east", "ocp-4-16", nil)
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	hc := w.hostedCluster(t, "prod-east")
	require.NotNil(t, hc)
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), releaseImageOf(hc))
	clusterID, _, _ := unstructured.NestedString(hc.Object, "spec", "clusterID")
	require.Equal(t, c.Id.String(), clusterID)
	require.Equal(t, c.Id.String(), hc.GetLabels()[hostedcluster.LabelClusterID])
	st := applierReport(t, w.api, c)
	require.Equal(t, "4.16.2", st.Data[hostedcluster.DataCurrentVersion])
	require.Equal(t, "Completed", st.Data[hostedcluster.DataUpgradeState])
	require.Equal(t, "prod-east-admin-kubeconfig", st.Data[hostedcluster.DataKubeconfigSecret])
	require.NotEmpty(t, st.Data[hostedcluster.DataAPIEndpoint])
	pull, err := w.env.Clientset.CoreV1().Secrets(w.namespace).Get(ctxFor(t), c.Id.String()+"-pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
	require.JSONEq(t, `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`, string(pull.Data[".dockerconfigjson"]))

	// A settled cluster re-checked writes nothing to Kubernetes.
	settledVersion := hc.GetResourceVersion()
	applier.Wake(adapter.Clusters(), "", c.Id.String())
	time.Sleep(500 * time.Millisecond) // let the woken reconcile run; what is checked is that nothing changed
	require.Equal(t, settledVersion, w.hostedCluster(t, "prod-east").GetResourceVersion(), "re-applying an unchanged cluster writes nothing")

	// Cincinnati publishes 4.16.3: the resolver moves the stream, the applier rolls the cluster at once.
	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	eventually(t, "the cluster rolled to 4.16.3", func() bool {
		st := applierReport(t, w.api, c)
		return st != nil && st.Data[hostedcluster.DataCurrentVersion] == "4.16.3" && st.Data[hostedcluster.DataUpgradeState] == "Completed"
	})
	require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), releaseImageOf(w.hostedCluster(t, "prod-east")))
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)

	w.deleteCluster(t, c, "the cluster removed after its HostedCluster")
	require.Nil(t, w.hostedCluster(t, "prod-east"), "the HostedCluster is gone")
	_, err = w.env.Clientset.CoreV1().Secrets(w.namespace).Get(ctxFor(t), c.Id.String()+"-pull-secret", metav1.GetOptions{})
	require.Error(t, err, "the pull secret is gone too")
}

// A new image waits for the cluster's UpgradeSchedule: while it is closed the cluster reports UpgradePending with
// the next window and keeps its image; opening the schedule rolls it at once. A cluster without a schedule rolls
// immediately, and a HostedCluster that is not the cluster's is left alone.
func TestApplierRollsOnlyInsideTheSchedule(t *testing.T) {
	w := startApplierWorld(t)
	w.startApplier(t, nil, nil)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))

	// A window that is surely closed now: one hour, starting in twelve.
	start := time.Now().UTC().Add(12 * time.Hour)
	body := `{"name":"later","spec":{"timezone":"UTC","windows":[{"days":["` + start.Weekday().String() + `"],"start":"` +
		start.Format("15:04") + `","duration":"1h"}]}}`
	sched, err := w.api.CreateUpgradeScheduleWithBodyWithResponse(ctxFor(t), nil, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, sched.StatusCode(), "body: %s", sched.Body)
	gated := createClusterNamed(t, w.api, "gated", "ocp-4-16", ptr("later"))
	free := createClusterNamed(t, w.api, "free", "ocp-4-16", nil)
	waitForPhase(t, w.api, gated, api.ResourceStatusPhaseReady)
	waitForPhase(t, w.api, free, api.ResourceStatusPhaseReady)
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), releaseImageOf(w.hostedCluster(t, "gated")), "a first install does not wait")

	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	eventually(t, "the cluster without a schedule rolled", func() bool {
		return releaseImageOf(w.hostedCluster(t, "free")) == cincinnatisim.PayloadFor("4.16.3", "amd64")
	})
	var pending *api.AdapterStatus
	eventually(t, "the gated cluster reports UpgradePending", func() bool {
		pending = applierReport(t, w.api, gated)
		return conditionIs(pending, hostedcluster.ConditionUpgradePending, "True", hostedcluster.ReasonOutsideUpgradeWindow)
	})
	require.Equal(t, cincinnatisim.PayloadFor("4.16.3", "amd64"), pending.Data[hostedcluster.DataDesiredReleaseImage])
	require.Equal(t, start.Truncate(time.Minute).Format(time.RFC3339), pending.Data[hostedcluster.DataNextUpgradeWindow])
	require.Contains(t, deref(condition(pending, hostedcluster.ConditionUpgradePending).Message), start.Truncate(time.Minute).Format(time.RFC3339))
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), releaseImageOf(w.hostedCluster(t, "gated")), "outside the window nothing rolls")
	waitForPhase(t, w.api, gated, api.ResourceStatusPhaseReady)

	// The operator opens the schedule (no windows: always open): the change re-queues the cluster, which rolls.
	open, err := w.api.PatchUpgradeScheduleWithBodyWithResponse(ctxFor(t), sched.JSON201.Id, nil, "application/merge-patch+json",
		strings.NewReader(`{"spec":{"windows":null}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, open.StatusCode(), "body: %s", open.Body)
	eventually(t, "the gated cluster rolled once its schedule opened", func() bool {
		st := applierReport(t, w.api, gated)
		return st != nil && st.Data[hostedcluster.DataCurrentVersion] == "4.16.3" &&
			conditionIs(st, hostedcluster.ConditionUpgradePending, "False", hostedcluster.ReasonAtReleaseImage)
	})

	// An object of that name that is not the cluster's: reported, never adopted.
	foreign := kubeenv.HostedCluster(w.namespace, "taken", cincinnatisim.PayloadFor("4.16.1", "amd64"))
	foreign.SetLabels(map[string]string{hostedcluster.LabelClusterID: "someone-else"})
	_, err = w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace).Create(ctxFor(t), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	taken := createClusterNamed(t, w.api, "taken", "ocp-4-16", nil)
	eventually(t, "the conflict reported", func() bool {
		return conditionIs(applierReport(t, w.api, taken), "Available", "False", hostedcluster.ReasonHostedClusterConflict)
	})
	left := w.hostedCluster(t, "taken")
	require.Equal(t, "someone-else", left.GetLabels()[hostedcluster.LabelClusterID])
	require.Equal(t, cincinnatisim.PayloadFor("4.16.1", "amd64"), releaseImageOf(left))
	require.Empty(t, left.GetAnnotations()[hostedcluster.AnnotationAppliedHash], "the applier never wrote to it")
}

// Two applier replicas with --shard-count 2 split the clusters: each cluster is only ever reported on by the
// replica of its shard.
func TestApplierReplicasSplitTheClusters(t *testing.T) {
	w := startApplierWorld(t)
	for i := range 2 {
		w.startApplier(t, func(c *adapter.Config) {
			c.ShardIndex, c.ShardCount, c.Replica, c.ResyncAfter = i, 2, "applier-"+string(rune('a'+i)), time.Minute
		}, nil)
	}
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	var clusters []*api.Cluster
	for _, name := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"} {
		clusters = append(clusters, createClusterNamed(t, w.api, name, "ocp-4-16", nil))
	}
	for _, c := range clusters {
		waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	}
	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	for _, c := range clusters {
		eventually(t, c.Name+" rolled", func() bool {
			st := applierReport(t, w.api, c)
			return st != nil && st.Data[hostedcluster.DataCurrentVersion] == "4.16.3"
		})
		st := applierReport(t, w.api, c)
		want := "applier-" + string(rune('a'+adapter.ShardOf(c.Id.String(), 2)))
		require.Equal(t, want, st.Metadata["replica"], "%s is %s's", c.Name, want)
	}
}

// haltingTransport lets requests through until the first apply of a HostedCluster, which it sends and whose
// answer it then withholds until the test lets go: the applier dies with its write made but unacknowledged.
type haltingTransport struct {
	base   http.RoundTripper
	once   sync.Once
	halted chan struct{}
	kill   chan struct{}
}

func (h *haltingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/hostedclusters/") {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.halted)
			<-h.kill
			if err == nil {
				_ = resp.Body.Close()
			}
			return nil, errors.New("killed")
		}
	}
	return resp, err
}

// The applier killed in the middle of an apply (its write made, the answer never read) and started again: there is
// still one HostedCluster, and the cluster converges.
func TestApplierKilledMidApplyConverges(t *testing.T) {
	w := startApplierWorld(t)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))

	halt := &haltingTransport{halted: make(chan struct{}), kill: make(chan struct{})}
	kube := rest.CopyConfig(w.env.Config)
	kube.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { halt.base = rt; return halt }
	cfg := runtimeConfig(t, w.api, hostedcluster.Name)
	cfg.DrainTimeout = 100 * time.Millisecond
	first, err := hostedcluster.New(cfg, hostedcluster.Options{Namespace: w.namespace, PullSecretFile: w.pull,
		ProgressInterval: time.Second, SyncTimeout: time.Minute}, kube, testLogger())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()

	c := createClusterNamed(t, w.api, "survivor", "ocp-4-16", nil)
	<-halt.halted
	cancel() // the process dies: nothing after the write happens
	close(halt.kill)
	require.NoError(t, <-done)
	require.NotNil(t, w.hostedCluster(t, "survivor"), "the write reached the management cluster")

	w.startApplier(t, nil, nil)
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	list, err := w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace).List(ctxFor(t),
		metav1.ListOptions{LabelSelector: hostedcluster.LabelClusterID + "=" + c.Id.String()})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "one HostedCluster for the cluster")
	secrets, err := w.env.Clientset.CoreV1().Secrets(w.namespace).List(ctxFor(t),
		metav1.ListOptions{LabelSelector: hostedcluster.LabelClusterID + "=" + c.Id.String()})
	require.NoError(t, err)
	require.Len(t, secrets.Items, 1, "one pull secret")
}

// The applier works with exactly the rights adapters/hostedcluster/rbac.yaml grants its ServiceAccount: the file
// is applied to the real kube-apiserver (which authorizes with RBAC) and the applier runs as that account.
func TestApplierNeedsOnlyItsRole(t *testing.T) {
	w := startApplierWorldIn(t, "clusters")
	for _, doc := range strings.Split(string(hostedcluster.RBACManifest()), "\n---\n") {
		obj := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj.Object))
		gvr := map[string]schema.GroupVersionResource{
			"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
			"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
			"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		}[obj.GetKind()]
		require.NotEmpty(t, gvr.Resource, "unexpected %s in rbac.yaml", obj.GetKind())
		raw, err := obj.MarshalJSON()
		require.NoError(t, err)
		_, err = w.env.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctxFor(t), obj.GetName(), types.ApplyPatchType, raw,
			metav1.PatchOptions{FieldManager: "test"})
		require.NoError(t, err, "applying %s %s", obj.GetKind(), obj.GetName())
	}
	account := w.env.User(t, "system:serviceaccount:clusters:hostedcluster-applier", "system:serviceaccounts", "system:authenticated")
	w.startApplier(t, nil, account)

	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	c := createClusterNamed(t, w.api, "least-privilege", "ocp-4-16", nil)
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	w.deleteCluster(t, c, "the cluster removed")

	// The same account may not touch another namespace.
	_, err := dynamicFor(t, account).Resource(kubeenv.HostedClusters()).Namespace("default").List(ctxFor(t), metav1.ListOptions{})
	require.Error(t, err)
}

func dynamicFor(tb testing.TB, cfg *rest.Config) dynamic.Interface {
	tb.Helper()
	client, err := dynamic.NewForConfig(cfg)
	require.NoError(tb, err)
	return client
}
