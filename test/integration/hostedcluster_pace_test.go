package integration

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// pullSecretsWith counts the clusters' pull-secret Secrets whose content is pull.
func (w *applierWorld) pullSecretsWith(tb testing.TB, pull string) int {
	tb.Helper()
	list, err := w.env.Clientset.CoreV1().Secrets(w.namespace).List(ctxFor(tb), metav1.ListOptions{LabelSelector: hostedcluster.LabelClusterID})
	require.NoError(tb, err)
	n := 0
	for _, s := range list.Items {
		if string(s.Data[".dockerconfigjson"]) == pull {
			n++
		}
	}
	return n
}

// A change of the applier's own (here a new pull secret, picked up by a restarted applier, as a new version of it
// would be) reaches the fleet at --reapply-rate, not in one pass: when the first cluster has the new secret, others
// still have the old one and report ReapplyPending=True (ReapplyPaced); in the end every cluster has it.
func TestApplierPacesItsOwnChanges(t *testing.T) {
	const fleet = 10
	w := startApplierWorld(t)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))

	stop := w.runApplierUntilStopped(t, 0, 0)
	var clusters []*api.Cluster
	for i := range fleet {
		clusters = append(clusters, createClusterNamed(t, w.api, "paced-"+string(rune('a'+i)), "ocp-4-16", nil))
	}
	for _, c := range clusters {
		waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	}
	stop()

	const rotated = `{"auths":{"quay.io":{"auth":"cm90YXRlZDpwYXNz"}}}`
	require.NoError(t, os.WriteFile(w.pull, []byte(rotated), 0o600))
	runInBackground(t, func(ctx context.Context) error {
		stop := w.runApplierUntilStopped(t, 2, 1)
		<-ctx.Done()
		stop()
		return nil
	})

	var firstSeen int
	eventually(t, "the first cluster re-applied", func() bool {
		firstSeen = w.pullSecretsWith(t, rotated)
		return firstSeen > 0
	})
	require.Less(t, firstSeen, fleet, "the whole fleet re-applied in one pass")
	t.Logf("at the first observation %d of %d clusters had the rotated pull secret", firstSeen, fleet)
	paced := false
	eventually(t, "a cluster reports its re-apply paced", func() bool {
		for _, c := range clusters {
			if conditionIs(applierReport(t, w.api, c), hostedcluster.ConditionReapplyPending, "True", hostedcluster.ReasonReapplyPaced) {
				paced = true
			}
		}
		return paced || w.pullSecretsWith(t, rotated) == fleet
	})
	require.True(t, paced, "no cluster reported ReapplyPaced before all were re-applied")
	eventually(t, "every cluster re-applied", func() bool { return w.pullSecretsWith(t, rotated) == fleet })
	for _, c := range clusters {
		eventually(t, c.Name+" reports its re-apply done", func() bool {
			return conditionIs(applierReport(t, w.api, c), hostedcluster.ConditionReapplyPending, "False", hostedcluster.ReasonApplied)
		})
	}
}

// runApplierUntilStopped runs an applier with the world's namespace and pull secret and the given pace until the
// returned stop is called (an applier version being replaced).
func (w *applierWorld) runApplierUntilStopped(tb testing.TB, rate float64, burst int) (stop func()) {
	tb.Helper()
	a, err := hostedcluster.New(runtimeConfig(tb, w.api, hostedcluster.Name), hostedcluster.Options{Namespace: w.namespace,
		PullSecretFile: w.pull, ProgressInterval: time.Second, SyncTimeout: time.Minute, ReapplyRate: rate, ReapplyBurst: burst},
		w.env.Config, testLogger())
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() {
		cancel()
		require.NoError(tb, <-done)
	}
}

// Outside its UpgradeSchedule's window a cluster's own spec change rolls at once, even while a re-apply of the
// applier's own holds it back (a rotated pull secret, paced at 0.001/s: after the one token of the burst, any
// paced write would wait 1000s), and takes that re-apply with it; the stream's new release image keeps waiting
// for the window.
func TestApplierRollsSpecChangesAtOnceAndReleasesInTheWindow(t *testing.T) {
	w := startApplierWorld(t)
	stream := createStream(t, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(t, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))
	stop := w.runApplierUntilStopped(t, 0, 0)

	start := time.Now().UTC().Add(12 * time.Hour) // a one-hour window twelve hours away: surely closed now
	body := `{"name":"later","spec":{"timezone":"UTC","windows":[{"days":["` + start.Weekday().String() + `"],"start":"` +
		start.Format("15:04") + `","duration":"1h"}]}}`
	sched, err := w.api.CreateUpgradeScheduleWithBodyWithResponse(ctxFor(t), nil, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, sched.StatusCode(), "body: %s", sched.Body)
	clusters := []*api.Cluster{createClusterNamed(t, w.api, "windowed-a", "ocp-4-16", ptr("later")),
		createClusterNamed(t, w.api, "windowed-b", "ocp-4-16", ptr("later"))}
	for _, c := range clusters {
		waitForPhase(t, w.api, c, api.ResourceStatusPhaseReady)
	}
	require.NoError(t, w.cincinati.sim.Publish("stable-4.16", "amd64", "4.16.3", cincinnatisim.PayloadFor("4.16.3", "amd64")))
	for _, c := range clusters {
		eventually(t, c.Name+": the new release waits for the window", func() bool {
			return conditionIs(applierReport(t, w.api, c), hostedcluster.ConditionUpgradePending, "True", hostedcluster.ReasonOutsideUpgradeWindow)
		})
	}
	stop()

	const rotated = `{"auths":{"quay.io":{"auth":"cm90YXRlZDpwYXNz"}}}`
	require.NoError(t, os.WriteFile(w.pull, []byte(rotated), 0o600))
	runInBackground(t, func(ctx context.Context) error {
		stop := w.runApplierUntilStopped(t, 0.001, 1)
		<-ctx.Done()
		stop()
		return nil
	})
	var held *api.Cluster
	eventually(t, "one cluster's re-apply is paced", func() bool {
		for _, c := range clusters {
			if conditionIs(applierReport(t, w.api, c), hostedcluster.ConditionReapplyPending, "True", hostedcluster.ReasonReapplyPaced) {
				held = c
				return true
			}
		}
		return false
	})
	// The other cluster took the burst's one token; its write may land just after the held one's report.
	eventually(t, "the burst of one re-applied the other cluster", func() bool { return w.pullSecretsWith(t, rotated) == 1 })

	changed := patchCluster(t, w.api, held, `{"spec":{"hosted_cluster":{"node_selector":{"role":"infra"}}}}`)
	eventually(t, "the spec change applied with the window closed and the pacer empty", func() bool {
		hc := w.hostedCluster(t, held.Name)
		selector, _, _ := unstructured.NestedStringMap(hc.Object, "spec", "nodeSelector")
		return selector["role"] == "infra"
	})
	require.Equal(t, 2, w.pullSecretsWith(t, rotated), "the spec change took the held re-apply with it")
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), releaseImageOf(w.hostedCluster(t, held.Name)),
		"the release still waits for the window")
	eventually(t, "the applier reports the new generation applied, the release still pending", func() bool {
		st := applierReport(t, w.api, held)
		return st != nil && st.ObservedGeneration == changed.Generation &&
			conditionIs(st, hostedcluster.ConditionReapplyPending, "False", hostedcluster.ReasonApplied) &&
			conditionIs(st, hostedcluster.ConditionUpgradePending, "True", hostedcluster.ReasonOutsideUpgradeWindow)
	})
}
