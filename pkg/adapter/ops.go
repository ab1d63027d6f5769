package adapter

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsHandler serves /healthz (liveness: the process's own loops turn), /readyz (readiness: the replica can do its
// work now) and /metrics; see health for what each judges. Liveness never depends on the API or the external
// system, so an outage makes replicas unready, never restarted.
func (r *Runner) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.liveness(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.readiness(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{}))
	return mux
}

// oneIfNil is a gauge's value for a check: 1 when it passed.
func oneIfNil(err error) float64 {
	if err != nil {
		return 0
	}
	return 1
}
