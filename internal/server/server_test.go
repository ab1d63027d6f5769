package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// migrateFor sets the database's required adapters (none) as the migrate Job would: serve only reads them.
func migrateFor(tb testing.TB, cfg Config) {
	tb.Helper()
	cfg.RequiredAdapters = map[string][]string{}
	require.NoError(tb, RunMigrations(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil))))
}

func TestListenersServeHTTPSWhereEnabled(t *testing.T) {
	certFile, keyFile := writeSelfSigned(t, t.TempDir(), "hyperfleet-test")
	cfg := Config{
		Env: EnvIntegrationTesting, APIBindAddress: "127.0.0.1:0", HealthBindAddress: "127.0.0.1:0", MetricsBindAddress: "127.0.0.1:0",
		HTTPReadTimeout: 5 * time.Second, HTTPWriteTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20,
		DB:          DBConfig{URL: harness.NewDatabase(t), SSLMode: "disable"},
		EnableHTTPS: true, EnableHealthHTTPS: true, HTTPSCertFile: certFile, HTTPSKeyFile: keyFile,
	}
	migrateFor(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	pem, err := os.ReadFile(certFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}

	tests := []struct {
		name, url string
		want      int
	}{
		{"API over TLS", "https://" + srv.APIAddr() + "/api/hyperfleet/v1", http.StatusOK},
		{"health over TLS", "https://" + srv.HealthAddr() + "/healthz", http.StatusOK},
		{"metrics stay plain", "http://" + srv.MetricsAddr() + "/metrics", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get(tt.url)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, tt.want, resp.StatusCode)
		})
	}
	// Plain HTTP to a TLS listener is refused by the TLS layer, not answered.
	resp, err := http.Get("http://" + srv.APIAddr() + "/api/hyperfleet/v1")
	if err == nil {
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
}

func TestRequestsAreTracedToTheOTLPEndpoint(t *testing.T) {
	var mu sync.Mutex
	var exports []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		exports = append(exports, r.URL.Path+" "+r.Header.Get("Content-Type")+" "+strconv.Itoa(len(body)))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	cfg := Config{
		Env: EnvIntegrationTesting, APIBindAddress: "127.0.0.1:0", HealthBindAddress: "127.0.0.1:0", MetricsBindAddress: "127.0.0.1:0",
		ShutdownTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20, DB: DBConfig{URL: harness.NewDatabase(t), SSLMode: "disable"},
		EnableTracing: true, OTLPEndpoint: collector.URL + "/v1/traces", TraceSampleRatio: 1,
	}
	migrateFor(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	resp, err := http.Get("http://" + srv.APIAddr() + "/api/hyperfleet/v1/clusters")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// Stopping flushes the batch.
	cancel()
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, exports, "no spans reached the collector")
	require.Contains(t, exports[0], "/v1/traces application/x-protobuf")
}
