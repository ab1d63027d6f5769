// Package soak holds the tests that must run for minutes of wall time with the system's real defaults. They sit in
// a package of their own so that `go test ./...` runs them beside the other packages rather than after them.
package soak

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

const soakAdapter = "soak-adapter"

// available reports every resource Available, at once.
type available struct{}

func (available) Reconcile(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Available: conditions.Reported{Status: conditions.True, Reason: "Soaked"}}, nil
}

func (available) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Finalized: true}, nil
}

// A watch of a kind nobody changes, kept for five minutes with every default of hyperfleet-api (its 15 s
// heartbeat, its 30 s read and write timeouts, its 2 min keep-alive) and of the runtime (its 1 min idle timeout),
// connects once and never again: the heartbeats keep it, and the idle detector hears every one.
func TestSoakQuietWatchKeepsItsConnectionForFiveMinutes(t *testing.T) {
	srv := apitest.Start(t, server.Config{DB: server.DBConfig{URL: harness.NewDatabase(t)},
		RequiredAdapters: map[string][]string{"versionstream": {soakAdapter}},
		HTTPReadTimeout:  30 * time.Second, HTTPWriteTimeout: 30 * time.Second, HTTPIdleTimeout: 2 * time.Minute})
	cfg := adapter.Defaults(soakAdapter, "127.0.0.1:0")
	cfg.APIURL = srv.API
	cfg.PollInterval = time.Hour // nothing but the watch
	runner, err := adapter.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(ctx, adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: available{}})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	time.Sleep(5*time.Minute + 10*time.Second)
	metrics := scrape(t, "http://"+runner.OpsAddr()+"/metrics")
	require.Equal(t, "1", metrics[`hyperfleet_adapter_relists_total{adapter="soak-adapter",kind="VersionStream",reason="start"}`],
		"one list, before the watch")
	require.NotContains(t, metrics, `hyperfleet_adapter_source_reconnects_total{adapter="soak-adapter",kind="VersionStream",source="watch"}`,
		"the watch never connected again")
	require.Equal(t, "1", metrics[`hyperfleet_adapter_ready{adapter="soak-adapter"}`])
}

// scrape returns a /metrics page's samples by series.
func scrape(tb testing.TB, url string) map[string]string {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, http.NoBody)
	require.NoError(tb, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	out := map[string]string{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	require.NoError(tb, lines.Err())
	require.NotEmpty(tb, out, "an empty /metrics page")
	return out
}
