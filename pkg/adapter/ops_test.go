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

func TestOpsEndpointsFollowTheSources(t *testing.T) {
	tests := []struct {
		source string
		window time.Duration // how long /healthz tolerates silence
	}{
		{source: SourcePoll, window: 3 * DefaultPollInterval},
		{source: SourceWatch, window: 3 * DefaultWatchIdleTimeout}, // not three 5-minute safety-net polls
		{source: SourceNATS, window: 3 * DefaultWatchIdleTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
			cfg := Defaults("test-adapter", "127.0.0.1:0")
			cfg.Clock, cfg.Source, cfg.NATSURL = clk, tt.source, "nats://127.0.0.1:4222"
			r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = r.ops.Close() })
			require.Equal(t, tt.window, r.healthWindow())
			r.started = clk.Now()
			h := r.opsHandler()
			status := func(path string) int {
				t.Helper()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, http.NoBody))
				return rec.Code
			}
			grace := tt.window

			steps := []struct {
				name           string
				do             func()
				healthz, ready int
			}{
				{"just started, nothing listed yet", func() {}, http.StatusOK, http.StatusServiceUnavailable},
				{"no contact within the window", func() { clk.Step(grace + time.Second) }, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
				{"pending work listed", func() { r.listed.Store(true); r.contact() }, http.StatusOK, http.StatusOK},
				{"silent for less than the window", func() { clk.Step(grace - time.Second) }, http.StatusOK, http.StatusOK},
				{"silent for longer", func() { clk.Step(2 * time.Second) }, http.StatusServiceUnavailable, http.StatusOK},
				{"a heartbeat or a poll", func() { r.contact() }, http.StatusOK, http.StatusOK},
				{"draining", func() { r.stopping.Store(true) }, http.StatusOK, http.StatusServiceUnavailable},
			}
			for _, step := range steps {
				step.do()
				require.Equal(t, step.healthz, status("/healthz"), step.name)
				require.Equal(t, step.ready, status("/readyz"), step.name)
			}
			require.Equal(t, http.StatusOK, status("/metrics"))
		})
	}
}
