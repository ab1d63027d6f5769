package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// readyCluster starts the applier and a resolved stream, and creates the cluster name on it, Ready.
func (w *applierWorld) readyCluster(t *testing.T, name string) (*hostedcluster.Adapter, *api.Cluster) {
	t.Helper()
	applier := w.startApplier(t, nil, nil)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	c := createClusterNamed(t, w.api, name, "ocp-4-16", nil)
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	return applier, c
}

// deleteCluster deletes c through the API and waits, saying what, until the API answers 404 for it.
func (w *applierWorld) deleteCluster(t *testing.T, c *api.Cluster, what string) {
	t.Helper()
	del, err := w.api.DeleteClusterWithResponse(ctxFor(t), c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	eventually(t, what, func() bool {
		resp, err := w.api.GetClusterWithResponse(ctxFor(t), c.Id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
}

// applierSeries names one series of the applier's own metrics, labels given sorted by name as "k=v".
func applierSeries(name string, labels ...string) string {
	parts := []string{`adapter="` + hostedcluster.Name + `"`}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		parts = append(parts, k+`="`+v+`"`)
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// patchClusterLabels merge-patches the cluster's labels.
func patchClusterLabels(tb testing.TB, s *apiServer, c *api.Cluster, labels string) {
	tb.Helper()
	resp, err := s.PatchClusterWithBodyWithResponse(ctxFor(tb), c.Id, nil, "application/merge-patch+json", strings.NewReader(`{"labels":`+labels+`}`))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
}

// A HostedCluster deleted by hand is reported HostedClusterMissing and is not made again, reconcile after
// reconcile, until the cluster's recreate label asks; then it is, once, and a request already spent asks for
// nothing more.
func TestApplierOwnMissingHostedClusterIsRecreatedOnlyWhenAsked(t *testing.T) {
	w := startApplierWorld(t)
	applier, c := w.readyCluster(t, "vanishing")
	first := w.hostedCluster(t, "vanishing")
	require.Equal(t, string(first.GetUID()), applierReport(t, w.api, c).Data[hostedcluster.DataHostedClusterUID])

	require.NoError(t, w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace).Delete(ctxFor(t), "vanishing", metav1.DeleteOptions{}))
	var st *api.AdapterStatus
	eventually(t, "the missing HostedCluster reported", func() bool {
		st = applierReport(t, w.api, c)
		return conditionIs(st, "Available", "False", hostedcluster.ReasonHostedClusterMissing)
	})
	require.Contains(t, deref(condition(st, "Available").Message), hostedcluster.LabelRecreate)
	require.Equal(t, string(first.GetUID()), st.Data[hostedcluster.DataHostedClusterUID], "the applier remembers what it had")

	// The applier keeps looking (every progress interval) and keeps not re-creating it.
	reconciles := applierSeries("hyperfleet_adapter_reconciles_total", "kind="+adapter.Clusters().Name, "result=success")
	seen := metricValue(t, applier.Runner, reconciles)
	eventually(t, "three more reconciles of the cluster", func() bool { return metricValue(t, applier.Runner, reconciles) >= seen+3 })
	require.Nil(t, w.hostedCluster(t, "vanishing"), "not re-created unasked")
	require.True(t, conditionIs(applierReport(t, w.api, c), "Available", "False", hostedcluster.ReasonHostedClusterMissing))

	patchClusterLabels(t, w.api, c, `{"`+hostedcluster.LabelRecreate+`":"1"}`)
	waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	second := w.hostedCluster(t, "vanishing")
	require.NotNil(t, second)
	require.NotEqual(t, first.GetUID(), second.GetUID(), "a new HostedCluster")
	eventually(t, "the new HostedCluster remembered, the request spent", func() bool {
		st = applierReport(t, w.api, c)
		return st != nil && st.Data[hostedcluster.DataHostedClusterUID] == string(second.GetUID()) && st.Data[hostedcluster.DataRecreateToken] == "1"
	})

	// Gone again: the spent request does not bring it back.
	require.NoError(t, w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace).Delete(ctxFor(t), "vanishing", metav1.DeleteOptions{}))
	eventually(t, "missing again", func() bool {
		return conditionIs(applierReport(t, w.api, c), "Available", "False", hostedcluster.ReasonHostedClusterMissing)
	})
	seen = metricValue(t, applier.Runner, reconciles)
	eventually(t, "three more reconciles of the cluster", func() bool { return metricValue(t, applier.Runner, reconciles) >= seen+3 })
	require.Nil(t, w.hostedCluster(t, "vanishing"), "a spent request asks for nothing")

	// Deleting the cluster needs no HostedCluster: its Secrets go, and so does the cluster.
	w.deleteCluster(t, c, "the cluster removed")
	secrets, err := w.env.Clientset.CoreV1().Secrets(w.namespace).List(ctxFor(t), metav1.ListOptions{LabelSelector: hostedcluster.LabelClusterID + "=" + c.Id.String()})
	require.NoError(t, err)
	require.Empty(t, secrets.Items)
}

// A hand edit of what the applier applied (the HostedCluster's spec and labels, a Secret's data) is set back
// although the applied hash is unchanged, and counted; a Secret of the cluster's under a name the applier no longer
// uses (the older naming by cluster name) is deleted, and a Secret that is not the cluster's is left alone.
func TestApplierOwnDriftIsSetBack(t *testing.T) {
	w := startApplierWorld(t)
	applier, c := w.readyCluster(t, "edited")
	hcs := w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace)
	hash := w.hostedCluster(t, "edited").GetAnnotations()[hostedcluster.AnnotationAppliedHash]

	_, err := hcs.Patch(ctxFor(t), "edited", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+hostedcluster.LabelClusterName+`":"renamed"}},"spec":{"infrastructureAvailabilityPolicy":"HighlyAvailable"}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	eventually(t, "the hand edit set back", func() bool {
		hc := w.hostedCluster(t, "edited")
		policy, _, _ := unstructured.NestedString(hc.Object, "spec", "infrastructureAvailabilityPolicy")
		return policy == "SingleReplica" && hc.GetLabels()[hostedcluster.LabelClusterName] == "edited"
	})
	hc := w.hostedCluster(t, "edited")
	require.Equal(t, hash, hc.GetAnnotations()[hostedcluster.AnnotationAppliedHash], "nothing else changed")
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), releaseImageOf(hc))
	drift := func(kind string) float64 {
		return metricValue(t, applier.Runner, applierSeries("hyperfleet_hostedcluster_drift_corrected_total", "kind="+kind))
	}
	require.Equal(t, 1.0, drift("HostedCluster"))

	secrets := w.env.Clientset.CoreV1().Secrets(w.namespace)
	pull, err := secrets.Get(ctxFor(t), c.Id.String()+"-pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
	want := string(pull.Data[".dockerconfigjson"])
	pull.Data[".dockerconfigjson"] = []byte(`{"auths":{"evil.example.com":{}}}`)
	_, err = secrets.Update(ctxFor(t), pull, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	eventually(t, "the pull secret set back", func() bool {
		got, err := secrets.Get(ctxFor(t), c.Id.String()+"-pull-secret", metav1.GetOptions{})
		require.NoError(t, err)
		return string(got.Data[".dockerconfigjson"]) == want
	})
	eventually(t, "the Secret's drift counted", func() bool { return drift("Secret") == 1 })

	// The pull secret as an older applier named it (by the cluster's name), and someone else's.
	labels := map[string]string{hostedcluster.LabelClusterID: c.Id.String(), hostedcluster.LabelManagedBy: "hyperfleet"}
	_, err = secrets.Create(ctxFor(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "edited-pull-secret", Labels: labels},
		Data: map[string][]byte{".dockerconfigjson": []byte(want)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = secrets.Create(ctxFor(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses",
		Labels: map[string]string{hostedcluster.LabelClusterID: "another-cluster", hostedcluster.LabelManagedBy: "hyperfleet"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, "the old-named Secret deleted", func() bool {
		_, err := secrets.Get(ctxFor(t), "edited-pull-secret", metav1.GetOptions{})
		return err != nil
	})
	_, err = secrets.Get(ctxFor(t), "someone-elses", metav1.GetOptions{})
	require.NoError(t, err, "not the cluster's: left alone")
	_, err = secrets.Get(ctxFor(t), c.Id.String()+"-pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
}
