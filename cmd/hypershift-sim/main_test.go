package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

func TestCommandFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    config
		wantErr bool
	}{
		{"defaults", nil, config{
			delay: hypershiftsim.DefaultDelay, deletionDelay: hypershiftsim.DefaultDeletionDelay,
			version: hypershiftsim.DefaultVersion, createSecrets: true, kubeQPS: defaultKubeQPS, kubeBurst: defaultKubeBurst,
		}, false},
		{"all flags", []string{
			"--kubeconfig", "/k", "--namespace", "clusters", "--delay", "0", "--deletion-delay", "1m",
			"--fallback-version", "4.16.0", "--create-secrets=false", "--log-level", "debug",
			"--health-bind-address", "127.0.0.1:9600", "--kube-api-qps", "7.5", "--kube-api-burst", "9",
		}, config{
			kubeconfig: "/k", namespace: "clusters", deletionDelay: time.Minute, version: "4.16.0",
			healthAddr: "127.0.0.1:9600", kubeQPS: 7.5, kubeBurst: 9,
		}, false},
		{"positional arguments", []string{"extra"}, config{}, true},
		{"bad duration", []string{"--delay", "soon"}, config{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got config
			cmd := newCommand(func(_ context.Context, cfg config, _ *slog.Logger) error { got = cfg; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
		want string
	}{
		{"negative delay", config{delay: -time.Second}, "must not be negative"},
		{"missing kubeconfig", config{kubeconfig: filepath.Join(t.TempDir(), "nope"), kubeQPS: 1, kubeBurst: 1}, "kubeconfig"},
		{"no rate", config{kubeBurst: 1}, "--kube-api-qps 0 and --kube-api-burst 1 must be positive"},
		{"no burst", config{kubeQPS: 1}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, run(context.Background(), tt.cfg, slog.New(slog.DiscardHandler)), tt.want)
		})
	}
}

// The client gets the kubeconfig's server and the flags' rate budget.
func TestClientConfigHasTheFlagsBudget(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: mc, cluster: {server: "https://mc.example:6443"}}]
users: [{name: sim, user: {token: t}}]
contexts: [{name: mc, context: {cluster: mc, user: sim}}]
current-context: mc
`), 0o600))
	tests := []struct {
		name      string
		args      []string
		wantQPS   float32
		wantBurst int
	}{
		{"defaults", nil, defaultKubeQPS, defaultKubeBurst},
		{"flags", []string{"--kube-api-qps", "30", "--kube-api-burst", "60"}, 30, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg config
			cmd := newCommand(func(_ context.Context, c config, _ *slog.Logger) error { cfg = c; return nil })
			cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, tt.args...))
			require.NoError(t, cmd.Execute())
			got, err := clientConfig(cfg)
			require.NoError(t, err)
			require.Equal(t, "https://mc.example:6443", got.Host)
			require.Equal(t, tt.wantQPS, got.QPS)
			require.Equal(t, tt.wantBurst, got.Burst)
		})
	}
}

// TestRun runs the command's run against a real kube-apiserver through a kubeconfig file, as the binary would
// be started, and stops it by ending its context, as SIGTERM does.
func TestRun(t *testing.T) {
	env := kubeenv.Start(t)
	ns := env.Namespace(t, "cmd")
	logs := &logbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{
			kubeconfig: env.WriteKubeconfig(t), namespace: ns, version: hypershiftsim.DefaultVersion,
			createSecrets: true, healthAddr: "127.0.0.1:0", kubeQPS: defaultKubeQPS, kubeBurst: defaultKubeBurst,
		}, slog.New(slog.NewJSONHandler(logs, nil)))
	}()
	var health string
	waitFor(t, "the health listener", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving health" {
				health = "http://" + rec.Addr
			}
		}
		return health != ""
	})
	waitFor(t, "/readyz to answer 200", func() bool { return httpStatus(t, health+"/readyz") == http.StatusOK })
	require.Equal(t, http.StatusOK, httpStatus(t, health+"/healthz"))

	hcs := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns)
	_, err := hcs.Create(context.Background(), kubeenv.HostedCluster(ns, "hc",
		"quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, "the HostedCluster to become available", func() bool {
		got, err := hcs.Get(context.Background(), "hc", metav1.GetOptions{})
		require.NoError(t, err)
		name, _, _ := unstructured.NestedString(got.Object, "status", "kubeconfig", "name")
		return name == "hc-admin-kubeconfig"
	})
	_, err = env.Clientset.CoreV1().Secrets(ns).Get(context.Background(), "hc-admin-kubeconfig", metav1.GetOptions{})
	require.NoError(t, err)

	require.NoError(t, hcs.Delete(context.Background(), "hc", metav1.DeleteOptions{}))
	waitFor(t, "the HostedCluster to go", func() bool {
		_, err := hcs.Get(context.Background(), "hc", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of its context's end")
	}
	out := logs.String()
	for _, msg := range []string{`"msg":"rollout completed"`, `"msg":"removed finalizer"`, `"msg":"stopped"`} {
		require.Contains(t, out, msg)
	}
	require.Contains(t, out, `"namespace":"`+ns+`","name":"hc"`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		require.True(t, strings.HasPrefix(line, "{"), "not a JSON log line: %s", line)
	}
}

func httpStatus(tb testing.TB, url string) int {
	tb.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // a loopback URL the test built
	require.NoError(tb, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestVersion(t *testing.T) {
	cmd := newCommand(func(context.Context, config, *slog.Logger) error { return nil })
	cmd.SetArgs([]string{"--version"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	require.NoError(t, cmd.Execute())
	require.Equal(t, "hypershift-sim version dev (unknown)\n", out.String())
}

func TestHealthHandler(t *testing.T) {
	tests := []struct {
		name   string
		ready  bool
		path   string
		status int
	}{
		{"alive while starting", false, "/healthz", http.StatusOK},
		{"not ready while starting", false, "/readyz", http.StatusServiceUnavailable},
		{"ready once simulating", true, "/readyz", http.StatusOK},
		{"unknown path", true, "/metrics", http.StatusNotFound},
		{"the release failures", true, "/admin/fail", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthHandler(fixedReadiness(tt.ready), hypershiftsim.AdminHandler(&hypershiftsim.Failures{})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, http.NoBody))
			require.Equal(t, tt.status, rec.Code)
		})
	}
}

type fixedReadiness bool

func (f fixedReadiness) Ready() bool { return bool(f) }

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
