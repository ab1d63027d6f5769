// Package apitest serves hyperfleet-api inside a test's process, as the binary serves it, on loopback ports. It
// sits beside test/harness rather than in it because pkg/server's own tests use the harness.
package apitest

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
)

// Server is a running API.
type Server struct {
	// API, Health and Metrics are the listeners' base URLs (http://host:port).
	API, Health, Metrics string
	stop                 func()
}

// Start serves cfg until the test ends or Stop is called. Fields left zero take the tests' defaults: the
// integration-testing environment, loopback ports the system chooses, 10 s request timeouts, a 256 KiB body
// limit, 20 database connections without TLS, version "test". cfg.DB.URL is required. The server's log is
// discarded unless HYPERFLEET_TEST_LOG is set.
//
// Before serving, Start runs migrate on the database as a deployment's migrate Job would, since serve only reads
// the required adapters: it sets cfg.RequiredAdapters, or none when they are nil.
//
// A test that dials the server should close its idle connections in a Cleanup registered after Start (so that
// it runs before the server drains): a connection dialed but never used holds the drain for its timeout.
func Start(tb testing.TB, cfg server.Config) *Server {
	tb.Helper()
	require.NotEmpty(tb, cfg.DB.URL, "apitest.Start needs a database URL")
	cfg.Env = cmp.Or(cfg.Env, server.EnvIntegrationTesting)
	cfg.APIBindAddress = cmp.Or(cfg.APIBindAddress, "127.0.0.1:0")
	cfg.HealthBindAddress = cmp.Or(cfg.HealthBindAddress, "127.0.0.1:0")
	cfg.MetricsBindAddress = cmp.Or(cfg.MetricsBindAddress, "127.0.0.1:0")
	cfg.HTTPReadTimeout = cmp.Or(cfg.HTTPReadTimeout, 10*time.Second)
	cfg.HTTPWriteTimeout = cmp.Or(cfg.HTTPWriteTimeout, 10*time.Second)
	cfg.HTTPIdleTimeout = cmp.Or(cfg.HTTPIdleTimeout, time.Minute)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 5*time.Second)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 256<<10)
	cfg.DB.SSLMode = cmp.Or(cfg.DB.SSLMode, "disable")
	cfg.DB.MaxOpenConns = cmp.Or(cfg.DB.MaxOpenConns, 20)
	cfg.Version, cfg.Build = cmp.Or(cfg.Version, "test"), cmp.Or(cfg.Build, "test")

	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if os.Getenv("HYPERFLEET_TEST_LOG") != "" {
		log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	migrateCfg := cfg
	if migrateCfg.RequiredAdapters == nil {
		migrateCfg.RequiredAdapters = map[string][]string{}
	}
	require.NoError(tb, server.RunMigrations(context.Background(), migrateCfg, log), "migrate, as the migrate Job would")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		cancel()
		require.NoError(tb, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	s := &Server{API: "http://" + srv.APIAddr(), Health: "http://" + srv.HealthAddr(), Metrics: "http://" + srv.MetricsAddr()}
	s.stop = func() {
		cancel()
		require.NoError(tb, <-done)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Stop drains and stops the server; later calls do nothing.
func (s *Server) Stop() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}
