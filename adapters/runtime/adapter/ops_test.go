package adapter

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

func TestOpsEndpointsFollowThePollLoop(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cfg := Defaults("test-adapter", "127.0.0.1:0")
	cfg.Clock = clk
	r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.ops.Close() })
	r.started = clk.Now()
	h := r.opsHandler()
	status := func(path string) int {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, http.NoBody))
		return rec.Code
	}
	grace := 3 * cfg.PollInterval

	steps := []struct {
		name           string
		do             func()
		healthz, ready int
	}{
		{"just started, no poll yet", func() {}, http.StatusOK, http.StatusServiceUnavailable},
		{"no poll within three intervals", func() { clk.Step(grace + time.Second) }, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
		{"a poll succeeded", func() { r.lastPoll.Store(clk.Now().UnixNano()) }, http.StatusOK, http.StatusOK},
		{"polls failing for less than three intervals", func() { clk.Step(grace - time.Second) }, http.StatusOK, http.StatusOK},
		{"polls failing for longer", func() { clk.Step(2 * time.Second) }, http.StatusServiceUnavailable, http.StatusOK},
		{"draining", func() { r.lastPoll.Store(clk.Now().UnixNano()); r.stopping.Store(true) }, http.StatusOK, http.StatusServiceUnavailable},
	}
	for _, step := range steps {
		step.do()
		require.Equal(t, step.healthz, status("/healthz"), step.name)
		require.Equal(t, step.ready, status("/readyz"), step.name)
	}
	require.Equal(t, http.StatusOK, status("/metrics"))
}
