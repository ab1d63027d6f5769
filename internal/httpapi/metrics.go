package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// The change feed as watches deliver it.
	watchStreams prometheus.Gauge
	deliveries   *prometheus.CounterVec
	lag          *prometheus.HistogramVec
	// rateLimited counts 429s by the budget that refused (its policy name: a closed set).
	rateLimited *prometheus.CounterVec
}

// delivered counts one event sent to a consumer and how long after its commit it went.
func (m *httpMetrics) delivered(consumer string, committed time.Time) {
	m.deliveries.WithLabelValues(consumer).Inc()
	m.lag.WithLabelValues(consumer).Observe(time.Since(committed).Seconds())
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_api_requests_total", Help: "API requests by method, route template and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hyperfleet_api_request_duration_seconds", Help: "API request latency by method and route template.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"method", "route"}),
		watchStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperfleet_watch_streams", Help: "Watch streams open."}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperfleet_events_delivered_total",
			Help: "Change feed events sent, by consumer (sse: watch streams)."}, []string{"consumer"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hyperfleet_event_lag_seconds",
			Help:    "Time from an event's commit to its delivery, by consumer.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"consumer"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperfleet_api_rate_limited_total",
			Help: "Requests refused 429 because a budget was empty, by the budget's policy: identity, adapter (an adapter identity's shard), or reads, writes, watches (a tenant's)."},
			[]string{"policy"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.watchStreams, m.deliveries, m.lag, m.rateLimited} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register http metrics: %w", err)
			}
		}
	}
	return m, nil
}

// observe counts one request. Every label takes its values from a closed set, whatever the client sends: a method
// outside the standard ones is "OTHER", a path no route matches is "unmatched" (routeTemplate), and the status is
// one the server wrote. An unauthenticated caller can thus never add series.
func (m *httpMetrics) observe(method, route string, status int, elapsed time.Duration) {
	method = knownMethod(method)
	m.requests.WithLabelValues(method, route, statusLabel(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(elapsed.Seconds())
}

// knownMethod returns method if it is one of HTTP's standard methods, else "OTHER".
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// statusLabel returns the status as a label; anything outside HTTP's range (a handler's bug) is one value.
func statusLabel(status int) string {
	if status < 100 || status > 599 {
		return "invalid"
	}
	return strconv.Itoa(status)
}

// DomainMetrics counts status writes and aggregation outcomes; it is the resource.Observer the server installs.
type DomainMetrics struct {
	statusWrites *prometheus.CounterVec
	aggregations *prometheus.CounterVec
}

// NewDomainMetrics registers the status-write and aggregation series with reg.
func NewDomainMetrics(reg prometheus.Registerer) (*DomainMetrics, error) {
	m := &DomainMetrics{
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_status_writes_total", Help: "Adapter status reports by resource kind and outcome (created, updated, unchanged: identical to the stored report and not written, stale, invalid, error).",
		}, []string{"kind", "outcome"}),
		aggregations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_aggregations_total", Help: "Aggregations on status writes by resource kind, resulting phase and whether the aggregate changed.",
		}, []string{"kind", "phase", "changed"}),
	}
	for _, c := range []prometheus.Collector{m.statusWrites, m.aggregations} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register domain metrics: %w", err)
		}
	}
	return m, nil
}

// StatusWritten implements resource.Observer.
func (m *DomainMetrics) StatusWritten(kind, outcome string) {
	m.statusWrites.WithLabelValues(kind, outcome).Inc()
}

// Aggregated implements resource.Observer.
func (m *DomainMetrics) Aggregated(kind string, phase conditions.Phase, changed bool) {
	m.aggregations.WithLabelValues(kind, string(phase), strconv.FormatBool(changed)).Inc()
}
