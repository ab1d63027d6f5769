package hypershiftsim_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

const (
	image416 = "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"
	image417 = "quay.io/openshift-release-dev/ocp-release:4.17.1-x86_64"
	// applier stands for the HostedCluster applier's field manager in these tests.
	applier = "hyperfleet-hostedcluster-applier"
)

// TestSimulator runs the simulator against a real kube-apiserver with the real HyperShift CRD. Each subtest has
// a namespace and a simulator of its own.
func TestSimulator(t *testing.T) {
	env := kubeenv.Start(t)

	t.Run("lifecycle with a fake clock", func(t *testing.T) {
		ns := env.Namespace(t, "lifecycle")
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		const delay, deletionDelay = time.Hour, 10 * time.Minute
		run(t, env, hypershiftsim.Options{Namespace: ns, Delay: delay, DeletionDelay: deletionDelay,
			CreateSecrets: true, Clock: clk})
		hcs := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns)

		apply(t, hcs, kubeenv.HostedCluster(ns, "hc", image416))
		got := eventually(t, "finalizer and a Partial rollout", nil, 0, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Partial@4.16.3"}, "False", "True")
		})
		require.Contains(t, got.GetFinalizers(), hypershiftsim.Finalizer)
		require.Equal(t, image416, str(t, got, "status", "version", "desired", "image"))
		require.Equal(t, "4.16.3", str(t, got, "status", "version", "desired", "version"))
		_, found, _ := unstructured.NestedMap(got.Object, "status", "kubeconfig")
		require.False(t, found, "no kubeconfig before the cluster is available")

		got = eventually(t, "the rollout to complete", clk, delay, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Completed@4.16.3"}, "True", "False")
		})
		history := historyOf(t, got)
		require.NotNil(t, history[0]["completionTime"])
		require.Equal(t, "hc-admin-kubeconfig", str(t, got, "status", "kubeconfig", "name"))
		require.Equal(t, "hc-kubeadmin-password", str(t, got, "status", "kubeadminPassword", "name"))
		require.Equal(t, "api.hc.example.com", str(t, got, "status", "controlPlaneEndpoint", "host"))
		port, _, _ := unstructured.NestedInt64(got.Object, "status", "controlPlaneEndpoint", "port")
		require.Equal(t, int64(6443), port)
		kubeconfig, err := env.Clientset.CoreV1().Secrets(ns).Get(ctx(t), "hc-admin-kubeconfig", metav1.GetOptions{})
		require.NoError(t, err)
		require.Contains(t, string(kubeconfig.Data[hypershiftsim.KubeconfigKey]), "server: https://api.hc.example.com:6443")
		_, err = env.Clientset.CoreV1().Secrets(ns).Get(ctx(t), "hc-kubeadmin-password", metav1.GetOptions{})
		require.NoError(t, err)

		upgrade := kubeenv.HostedCluster(ns, "hc", image417)
		got = apply(t, hcs, upgrade)
		require.Contains(t, got.GetFinalizers(), hypershiftsim.Finalizer, "the applier's apply keeps the simulator's finalizer")
		eventually(t, "an upgrade in progress", nil, 0, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Partial@4.17.1", "Completed@4.16.3"}, "True", "True")
		})
		eventually(t, "the upgrade to complete", clk, delay, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Completed@4.17.1", "Completed@4.16.3"}, "True", "False")
		})

		require.NoError(t, hcs.Delete(ctx(t), "hc", metav1.DeleteOptions{}))
		got, err = hcs.Get(ctx(t), "hc", metav1.GetOptions{})
		require.NoError(t, err, "the finalizer holds the object until the simulator lets it go")
		require.NotNil(t, got.GetDeletionTimestamp())
		eventually(t, "the HostedCluster to go", clk, deletionDelay, func() (*unstructured.Unstructured, error) {
			return gone(t, hcs, "hc")
		})
		_, err = env.Clientset.CoreV1().Secrets(ns).Get(ctx(t), "hc-admin-kubeconfig", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "kubeconfig secret deleted with the cluster, got %v", err)
	})

	t.Run("zero delays with the real clock", func(t *testing.T) {
		ns := env.Namespace(t, "zero")
		run(t, env, hypershiftsim.Options{Namespace: ns})
		hcs := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns)
		digest := "quay.io/openshift-release-dev/ocp-release@sha256:" + fmt.Sprintf("%064d", 1)
		_, err := hcs.Create(ctx(t), kubeenv.HostedCluster(ns, "hc", digest), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, "available", nil, 0, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Completed@" + hypershiftsim.DefaultVersion}, "True", "False")
		})
		require.NoError(t, hcs.Delete(ctx(t), "hc", metav1.DeleteOptions{}))
		eventually(t, "the HostedCluster to go", nil, 0, func() (*unstructured.Unstructured, error) {
			return gone(t, hcs, "hc")
		})
	})

	t.Run("a release told to fail over /admin/fail, on half of the clusters", func(t *testing.T) {
		ns := env.Namespace(t, "failing")
		failures := &hypershiftsim.Failures{}
		admin := httptest.NewServer(hypershiftsim.AdminHandler(failures))
		t.Cleanup(admin.Close)
		post := func(body string) int {
			resp, err := http.Post(admin.URL+"/admin/fail", "application/json", strings.NewReader(body))
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			return resp.StatusCode
		}
		require.Equal(t, http.StatusBadRequest, post(`{"version": "4.17.1", "mode": "Broken"}`))
		require.Equal(t, http.StatusNoContent, post(`{"version": "4.17.1", "mode": "Degraded", "percent": 50}`))
		run(t, env, hypershiftsim.Options{Namespace: ns, Failures: failures})
		hcs := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns)
		const n = 20
		for i := range n {
			apply(t, hcs, kubeenv.HostedCluster(ns, fmt.Sprintf("hc%d", i), image417))
		}
		degraded := 0
		for i := range n {
			got := eventually(t, "a completed or degraded rollout", nil, 0, func() (*unstructured.Unstructured, error) {
				if got, err := expect(t, hcs, fmt.Sprintf("hc%d", i), []string{"Completed@4.17.1"}, "True", "False"); err == nil {
					return got, nil
				}
				got, err := expect(t, hcs, fmt.Sprintf("hc%d", i), []string{"Partial@4.17.1"}, "False", "True")
				if err == nil && condition(got, "Degraded") != "True" {
					err = errors.New("partial, not degraded yet")
				}
				return got, err
			})
			if condition(got, "Degraded") == "True" {
				degraded++
			}
		}
		require.Positive(t, degraded, "some clusters fail")
		require.Less(t, degraded, n, "not all of them")

		req, err := http.NewRequest(http.MethodDelete, admin.URL+"/admin/fail?version=4.17.1", http.NoBody)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		for i := range n {
			eventually(t, "every rollout completed once the failure is cleared", nil, 0, func() (*unstructured.Unstructured, error) {
				got, err := expect(t, hcs, fmt.Sprintf("hc%d", i), []string{"Completed@4.17.1"}, "True", "False")
				if err == nil && condition(got, "Degraded") != "False" {
					err = errors.New("still degraded")
				}
				return got, err
			})
		}
	})

	t.Run("other finalizers are kept", func(t *testing.T) {
		ns := env.Namespace(t, "finalizers")
		run(t, env, hypershiftsim.Options{Namespace: ns})
		hcs := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns)
		const other = "example.com/keep"
		hc := kubeenv.HostedCluster(ns, "hc", image416)
		hc.SetFinalizers([]string{other})
		_, err := hcs.Create(ctx(t), hc, metav1.CreateOptions{})
		require.NoError(t, err)
		got := eventually(t, "available", nil, 0, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Completed@4.16.3"}, "True", "False")
		})
		require.ElementsMatch(t, []string{other, hypershiftsim.Finalizer}, got.GetFinalizers())

		require.NoError(t, hcs.Delete(ctx(t), "hc", metav1.DeleteOptions{}))
		got = eventually(t, "the simulator's finalizer to go", nil, 0, func() (*unstructured.Unstructured, error) {
			got, err := hcs.Get(ctx(t), "hc", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if slices.Contains(got.GetFinalizers(), hypershiftsim.Finalizer) {
				return nil, fmt.Errorf("finalizers %v", got.GetFinalizers())
			}
			return got, nil
		})
		require.Equal(t, []string{other}, got.GetFinalizers())

		_, err = hcs.Patch(ctx(t), "hc", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	})

	t.Run("a namespaced simulator touches only its namespace", func(t *testing.T) {
		mine, other := env.Namespace(t, "mine"), env.Namespace(t, "other")
		untouched, err := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(other).
			Create(ctx(t), kubeenv.HostedCluster(other, "hc", image416), metav1.CreateOptions{})
		require.NoError(t, err)
		run(t, env, hypershiftsim.Options{Namespace: mine})
		hcs := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(mine)
		_, err = hcs.Create(ctx(t), kubeenv.HostedCluster(mine, "hc", image416), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, "available", nil, 0, func() (*unstructured.Unstructured, error) {
			return expect(t, hcs, "hc", []string{"Completed@4.16.3"}, "True", "False")
		})

		got, err := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(other).Get(ctx(t), "hc", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, untouched.GetResourceVersion(), got.GetResourceVersion(), "the other namespace's HostedCluster was written")
		require.Empty(t, got.GetFinalizers())
		_, found, _ := unstructured.NestedMap(got.Object, "status")
		require.False(t, found)
	})
}

func TestRunWithoutClient(t *testing.T) {
	err := hypershiftsim.New(nil, hypershiftsim.Options{}).Run(context.Background())
	require.Error(t, err)
}

// run starts a simulator until the test ends, and checks then that it stopped cleanly.
func run(tb testing.TB, env *kubeenv.Env, opts hypershiftsim.Options) {
	tb.Helper()
	opts.Logger = slog.New(slog.NewJSONHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hypershiftsim.New(env.Dynamic, opts).Run(c) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(tb, err)
		case <-time.After(30 * time.Second):
			tb.Error("simulator did not stop within 30s of its context's end")
		}
	})
}

// eventually calls check until it succeeds or a generous deadline passes, and returns what it returned. With a
// clock, it steps the clock by step before each retry, so that timers set at any point fire.
func eventually(tb testing.TB, what string, clk *clocktesting.FakeClock, step time.Duration,
	check func() (*unstructured.Unstructured, error)) *unstructured.Unstructured {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := check()
		if err == nil {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("waiting for %s: %v", what, err)
		}
		if clk != nil {
			clk.Step(step)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expect returns the HostedCluster if its history (state@version, newest first) and Available and Progressing
// conditions are as given, else an error saying what they are.
func expect(tb testing.TB, hcs dynamic.ResourceInterface, name string, history []string, available, progressing string) (*unstructured.Unstructured, error) {
	tb.Helper()
	got, err := hcs.Get(ctx(tb), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var gotHistory []string
	for _, h := range historyOf(tb, got) {
		gotHistory = append(gotHistory, fmt.Sprintf("%v@%v", h["state"], h["version"]))
	}
	gotAvailable, gotProgressing := condition(got, "Available"), condition(got, "Progressing")
	if !slices.Equal(gotHistory, history) || gotAvailable != available || gotProgressing != progressing {
		return nil, fmt.Errorf("history %v Available=%q Progressing=%q", gotHistory, gotAvailable, gotProgressing)
	}
	for _, typ := range []string{"Degraded", "ValidReleaseImage"} {
		if condition(got, typ) == "" {
			return nil, fmt.Errorf("no %s condition", typ)
		}
	}
	return got, nil
}

func gone(tb testing.TB, hcs dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	tb.Helper()
	got, err := hcs.Get(ctx(tb), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("still there with finalizers %v", got.GetFinalizers())
}

func apply(tb testing.TB, hcs dynamic.ResourceInterface, hc *unstructured.Unstructured) *unstructured.Unstructured {
	tb.Helper()
	data, err := hc.MarshalJSON()
	require.NoError(tb, err)
	got, err := hcs.Patch(ctx(tb), hc.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: applier})
	require.NoError(tb, err)
	return got
}

func historyOf(tb testing.TB, hc *unstructured.Unstructured) []map[string]any {
	tb.Helper()
	raw, _, err := unstructured.NestedSlice(hc.Object, "status", "version", "history")
	require.NoError(tb, err)
	var out []map[string]any
	for _, h := range raw {
		m, ok := h.(map[string]any)
		require.True(tb, ok)
		out = append(out, m)
	}
	return out
}

func condition(hc *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func str(tb testing.TB, u *unstructured.Unstructured, fields ...string) string {
	tb.Helper()
	s, found, err := unstructured.NestedString(u.Object, fields...)
	require.NoError(tb, err)
	require.True(tb, found, "%v not set", fields)
	return s
}

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return c
}

// tbWriter sends the simulator's log lines to the test log, so that they show with a failure.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", p)
	return len(p), nil
}
