package adapter

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsHandler serves /healthz (the sources are alive: one heard from the API or NATS within healthWindow, or the
// adapter started less than that ago), /readyz (pending work has been listed and the adapter is not draining) and
// /metrics.
func (r *Runner) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		limit := r.healthWindow()
		last := r.lastContact.Load()
		now := r.clock.Now()
		if (last == 0 && now.Sub(r.started) > limit) || (last != 0 && now.Sub(time.Unix(0, last)) > limit) {
			http.Error(w, fmt.Sprintf("no successful poll or event of the %s source within %s", r.cfg.Source, limit), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case r.stopping.Load():
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case !r.listed.Load():
			http.Error(w, "pending work not listed yet", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{}))
	return mux
}
