package adapter

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// opsRunner is a runner on a fake clock whose ops endpoints the test calls directly, with status returning a
// path's code and body.
func opsRunner(t *testing.T, source string) (*Runner, *testingclock.FakeClock, func(path string) (int, string)) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cfg := Defaults("test-adapter", "127.0.0.1:0")
	cfg.Clock, cfg.Source, cfg.NATSURL = clk, source, "nats://127.0.0.1:4222"
	r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.ops.Close() })
	r.started = clk.Now()
	h := r.opsHandler()
	return r, clk, func(path string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, http.NoBody))
		return rec.Code, rec.Body.String()
	}
}

// An outage of the API or of the external system makes the replica unready and never fails its liveness: only its
// own loops do (a worker stuck past every bound, a queue nobody takes from).
func TestOpsLivenessIsTheProcessReadinessIsTheWork(t *testing.T) {
	tests := []struct {
		source string
		window time.Duration // how long /readyz tolerates silence of the sources
	}{
		{source: SourcePoll, window: 3 * DefaultPollInterval},
		{source: SourceWatch, window: 3 * DefaultWatchIdleTimeout}, // not three 5-minute safety-net polls
		{source: SourceNATS, window: 3 * DefaultWatchIdleTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			r, clk, status := opsRunner(t, tt.source)
			require.Equal(t, tt.window, r.healthWindow())
			system := r.ExternalTransport("hivelocity", nil).(*externalTransport)
			unreachable := errors.New("dial tcp: connection refused")
			var cacheStale error
			r.AddReadinessCheck("device cache", func() error { return cacheStale })
			steps := []struct {
				name           string
				do             func()
				healthz, ready int
				readyzSays     string
			}{
				{"just started, nothing listed yet", func() {}, http.StatusOK, http.StatusServiceUnavailable, "not listed"},
				{"the API silent past the window", func() { clk.Step(tt.window + time.Second) }, http.StatusOK, http.StatusServiceUnavailable, "not listed"},
				{"pending work listed", func() { r.listed.Store(true); r.contact() }, http.StatusOK, http.StatusOK, ""},
				{"silent for less than the window", func() { clk.Step(tt.window - time.Second) }, http.StatusOK, http.StatusOK, ""},
				{"silent for longer: an API outage", func() { clk.Step(2 * time.Second) }, http.StatusOK, http.StatusServiceUnavailable, "hyperfleet-api unreachable"},
				{"an outage of an hour", func() { clk.Step(time.Hour) }, http.StatusOK, http.StatusServiceUnavailable, "hyperfleet-api unreachable"},
				{"a heartbeat or a poll", func() { r.contact() }, http.StatusOK, http.StatusOK, ""},
				{"the external system fails once", func() { system.reached("hivelocity", false, unreachable.Error()) }, http.StatusOK, http.StatusOK, ""},
				{"and every call fails for the window", func() {
					clk.Step(tt.window + time.Second)
					r.contact()
					system.reached("hivelocity", false, unreachable.Error())
				}, http.StatusOK, http.StatusServiceUnavailable, "hivelocity unreachable"},
				{"the external system answers", func() { system.reached("hivelocity", true, "") }, http.StatusOK, http.StatusOK, ""},
				{"the adapter's cache is stale", func() { cacheStale = errors.New("no update for 5m") }, http.StatusOK, http.StatusServiceUnavailable, "device cache: no update for 5m"},
				{"fresh again", func() { cacheStale = nil }, http.StatusOK, http.StatusOK, ""},
				{"a worker takes a key", func() { r.health.took(3, clk.Now()) }, http.StatusOK, http.StatusOK, ""},
				{"and is still on it past every bound", func() { clk.Step(r.wedgedAfter() + time.Second); r.contact() }, http.StatusServiceUnavailable, http.StatusOK, ""},
				{"it finishes", func() { r.health.done(3) }, http.StatusOK, http.StatusOK, ""},
				{"draining", func() { r.stopping.Store(true) }, http.StatusOK, http.StatusServiceUnavailable, "draining"},
			}
			for _, step := range steps {
				step.do()
				code, _ := status("/healthz")
				require.Equal(t, step.healthz, code, step.name)
				code, body := status("/readyz")
				require.Equal(t, step.ready, code, step.name)
				require.Contains(t, body, step.readyzSays, step.name)
			}
			code, body := status("/metrics")
			require.Equal(t, http.StatusOK, code)
			require.Contains(t, body, `hyperfleet_adapter_live{adapter="test-adapter"} 1`)
			require.Contains(t, body, `hyperfleet_adapter_ready{adapter="test-adapter"} 0`)
		})
	}
}

// A queue with ready keys that no worker takes for longer than a worker may take on one key is not alive.
func TestOpsLivenessSeesAQueueThatDoesNotMove(t *testing.T) {
	r, clk, status := opsRunner(t, SourcePoll)
	r.queue.wake(Key{Kind: "versionstreams", ID: "a"})
	code, _ := status("/healthz")
	require.Equal(t, http.StatusOK, code, "ready work, just queued")
	clk.Step(r.wedgedAfter() + time.Second)
	code, body := status("/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.True(t, strings.Contains(body, "the queue does not move"), body)
	r.health.took(0, clk.Now())
	code, _ = status("/healthz")
	require.Equal(t, http.StatusOK, code, "a worker took a key")
}

// Which answers show an external system reachable with the adapter's credentials.
func TestOpsReachedSystem(t *testing.T) {
	tests := []struct {
		code int
		err  error
		want bool
	}{
		{code: http.StatusOK, want: true},
		{code: http.StatusNotFound, want: true},
		{code: http.StatusConflict, want: true},
		{code: http.StatusInternalServerError, want: true}, // about one object: the system answered
		{code: http.StatusUnauthorized, want: false},
		{code: http.StatusForbidden, want: false},
		{code: http.StatusBadGateway, want: false},
		{code: http.StatusServiceUnavailable, want: false},
		{code: http.StatusGatewayTimeout, want: false},
		{err: errors.New("connection refused"), want: false},
	}
	for _, tt := range tests {
		var resp *http.Response
		if tt.err == nil {
			resp = &http.Response{StatusCode: tt.code, Status: http.StatusText(tt.code)}
		}
		got, _ := reachedSystem(resp, tt.err)
		require.Equal(t, tt.want, got, "%d %v", tt.code, tt.err)
	}
}
