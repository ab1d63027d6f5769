package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

func TestListenersServeHTTPSWhereEnabled(t *testing.T) {
	certFile, keyFile := writeSelfSigned(t, t.TempDir(), "hyperfleet-test")
	cfg := Config{
		Env: EnvIntegrationTesting, APIBindAddress: "127.0.0.1:0", HealthBindAddress: "127.0.0.1:0", MetricsBindAddress: "127.0.0.1:0",
		HTTPReadTimeout: 5 * time.Second, HTTPWriteTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20,
		DB:          DBConfig{URL: harness.NewDatabase(t), SSLMode: "disable"},
		EnableHTTPS: true, EnableHealthHTTPS: true, HTTPSCertFile: certFile, HTTPSKeyFile: keyFile,
	}
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
