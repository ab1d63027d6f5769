package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// startSweepingApplier runs an applier whose orphan sweep has the given grace and dry-run setting, looking every
// 100 ms; stop ends it (and waits), as the test's end does.
func (w *applierWorld) startSweepingApplier(tb testing.TB, grace time.Duration, dryRun bool) (a *hostedcluster.Adapter, stop func()) {
	tb.Helper()
	a, err := hostedcluster.New(runtimeConfig(tb, w.api, hostedcluster.Name), hostedcluster.Options{Namespace: w.namespace, PullSecretFile: w.pull,
		ProgressInterval: time.Second, SyncTimeout: time.Minute, SweepGrace: grace, SweepInterval: 100 * time.Millisecond, SweepDryRun: dryRun},
		w.env.Config, testLogger())
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(tb, <-done)
		}
	}
	tb.Cleanup(stop)
	return a, stop
}

// A HostedCluster (and its Secret) labelled for a cluster the API no longer has (force-deleted, which skips the
// applier's finalizer) is only listed by a sweep with --sweep-dry-run, and deleted after the grace period by one
// without; the HostedCluster of a live cluster, and one that carries no cluster id, are left alone.
func TestApplierSweepRemovesOrphansAfterTheGrace(t *testing.T) {
	w := startApplierWorld(t)
	dry, stopDry := w.startSweepingApplier(t, 300*time.Millisecond, true)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	kept := createClusterNamed(t, w.api, "kept", "ocp-4-16", nil)
	forced := createClusterNamed(t, w.api, "forced", "ocp-4-16", nil)
	waitForPhase(t, w.api, kept, api.ResourceStatusPhaseReady)
	waitForPhase(t, w.api, forced, api.ResourceStatusPhaseReady)
	hcs := w.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(w.namespace)
	_, err := hcs.Create(ctxFor(t), kubeenv.HostedCluster(w.namespace, "unlabelled", cincinnatisim.PayloadFor("4.16.1", "amd64")), metav1.CreateOptions{})
	require.NoError(t, err)
	// One made by hand for a cluster that never was.
	stray := kubeenv.HostedCluster(w.namespace, "stray", cincinnatisim.PayloadFor("4.16.1", "amd64"))
	stray.SetLabels(map[string]string{hostedcluster.LabelClusterID: uuid.NewString()})
	_, err = hcs.Create(ctxFor(t), stray, metav1.CreateOptions{})
	require.NoError(t, err)

	resp, err := w.api.ForceDeleteClusterWithResponse(ctxFor(t), forced.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode(), "body: %s", resp.Body)

	wouldSweep := func(kind string) float64 {
		return metricValue(t, dry.Runner, applierSeries("hyperfleet_hostedcluster_orphans_would_sweep_total", "kind="+kind))
	}
	eventually(t, "the dry run listed the orphans", func() bool { return wouldSweep("HostedCluster") == 2 && wouldSweep("Secret") == 1 })
	require.Equal(t, 2.0, metricValue(t, dry.Runner, applierSeries("hyperfleet_hostedcluster_orphans", "kind=HostedCluster")))
	for _, name := range []string{"kept", "forced", "stray", "unlabelled"} {
		require.NotNil(t, w.hostedCluster(t, name), "a dry run deletes nothing: %s", name)
	}
	_, err = w.env.Clientset.CoreV1().Secrets(w.namespace).Get(ctxFor(t), forced.Id.String()+"-pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, 2.0, wouldSweep("HostedCluster"), "each listed once, round after round")
	stopDry()

	sweeping, _ := w.startSweepingApplier(t, 300*time.Millisecond, false)
	eventually(t, "the orphaned HostedClusters deleted", func() bool { return w.hostedCluster(t, "forced") == nil && w.hostedCluster(t, "stray") == nil })
	eventually(t, "the orphan's Secret deleted after its HostedCluster", func() bool {
		_, err := w.env.Clientset.CoreV1().Secrets(w.namespace).Get(ctxFor(t), forced.Id.String()+"-pull-secret", metav1.GetOptions{})
		return err != nil
	})
	swept := func(kind string) float64 {
		return metricValue(t, sweeping.Runner, applierSeries("hyperfleet_hostedcluster_orphans_swept_total", "kind="+kind))
	}
	require.Equal(t, 2.0, swept("HostedCluster"))
	require.Equal(t, 1.0, swept("Secret"))
	require.NotNil(t, w.hostedCluster(t, "kept"), "a live cluster's")
	require.NotNil(t, w.hostedCluster(t, "unlabelled"), "no cluster id: not the applier's")
	_, err = w.env.Clientset.CoreV1().Secrets(w.namespace).Get(ctxFor(t), kept.Id.String()+"-pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
	waitForPhase(t, w.api, kept, api.ResourceStatusPhaseReady)
}
