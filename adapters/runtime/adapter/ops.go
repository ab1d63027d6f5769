package adapter

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsHandler serves /healthz (the poll loop is alive: a poll succeeded within three intervals, or the adapter
// started less than that ago), /readyz (a poll has succeeded and the adapter is not draining) and /metrics.
func (r *Runner) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		limit := 3 * r.cfg.PollInterval
		last := r.lastPoll.Load()
		now := r.clock.Now()
		if (last == 0 && now.Sub(r.started) > limit) || (last != 0 && now.Sub(time.Unix(0, last)) > limit) {
			http.Error(w, fmt.Sprintf("no successful poll of hyperfleet-api within %s", limit), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case r.stopping.Load():
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case r.lastPoll.Load() == 0:
			http.Error(w, "no successful poll yet", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{}))
	return mux
}
