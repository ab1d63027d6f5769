package adapter

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are one adapter's Prometheus series. Every series carries the adapter as a constant label; the kind
// label's values are the kinds the adapter serves, so every label takes its values from a closed set.
type metrics struct {
	reconciles       *prometheus.CounterVec
	reconcileSeconds *prometheus.HistogramVec
	apiRequests      *prometheus.CounterVec
	externalRequests *prometheus.CounterVec
	polls            *prometheus.CounterVec
	dependents       *prometheus.CounterVec
	lastPoll         prometheus.Gauge
	// unchangedReports counts the posts skipped because they would have said what the last one said;
	// heldReads the reconciles that took their resource from the event that queued them rather than a read.
	unchangedReports *prometheus.CounterVec
	heldReads        *prometheus.CounterVec

	// The event sources (watch, nats): what they received, how late, where they are, and how often they had to
	// connect again or list again.
	events       *prometheus.CounterVec
	eventLag     *prometheus.HistogramVec
	feedPosition *prometheus.GaugeVec
	reconnects   *prometheus.CounterVec
	relists      *prometheus.CounterVec
}

// Reasons of a re-list (hyperfleet_adapter_relists_total).
const (
	relistStart   = "start"   // the source's first list
	relistExpired = "expired" // the watch position fell behind the API's retention (410 HYPERFLEET-WAT-001)
	relistFailed  = "failed"  // an event could not be handled, or a NATS consumer was created anew: the list finds what was missed
)

// gauges are values the metrics read when scraped.
type gauges struct {
	queueDepth    func() float64
	cachedReports func() float64
	// live and ready are 1 while /healthz and /readyz answer 200, else 0.
	live, ready func() float64
}

func newMetrics(reg *prometheus.Registry, adapter string, g gauges) *metrics {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := prometheus.WrapRegistererWith(prometheus.Labels{"adapter": adapter}, reg)
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_reconciles_total",
			Help: "Reconciles by result: success, transient_error, terminal_error, panic, stale (a newer report was already stored), paused (spec.paused: the reconciler was not called), gone (the resource was removed), not_reported (an API call failed).",
		}, []string{"kind", "result"}),
		reconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hyperfleet_adapter_reconcile_duration_seconds",
			Help:    "Time from taking a key off the queue to its status being posted.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"kind"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_api_requests_total",
			Help: "Requests to hyperfleet-api by operation and HTTP status code (\"error\" when no answer came).",
		}, []string{"op", "code"}),
		externalRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_external_requests_total",
			Help: "Requests to the external system the adapter owns, by system and HTTP status code (\"error\" when no answer came).",
		}, []string{"system", "code"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_polls_total",
			Help: "Polls of pending_for by kind and result (success, error).",
		}, []string{"kind", "result"}),
		dependents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_dependents_queued_total",
			Help: "Resources queued because a resource they name changed, by kind and the kind that changed.",
		}, []string{"kind", "changed_kind"}),
		lastPoll: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperfleet_adapter_last_successful_poll_timestamp_seconds",
			Help: "Unix time of the last poll that completed.",
		}),
		unchangedReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_reports_unchanged_total",
			Help: "Reconciles whose report was not posted because it said what this replica posted last, less than a heartbeat (--report-heartbeat) ago, by kind.",
		}, []string{"kind"}),
		heldReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_held_reads_total",
			Help: "Reconciles that took their resource from the change feed event that queued them instead of reading it from the API, by kind.",
		}, []string{"kind"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_events_received_total",
			Help: "Change feed events received, by source (watch, nats), kind and event type.",
		}, []string{"source", "kind", "type"}),
		eventLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hyperfleet_adapter_event_lag_seconds",
			Help:    "Time from a change's commit (the event's time) to its event reaching the adapter, by source.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"source"}),
		feedPosition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperfleet_adapter_feed_position",
			Help: "The change feed position (sequence number) a source last reached for a kind: a list's resource_version, then each event's.",
		}, []string{"source", "kind"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_source_reconnects_total",
			Help: "Times a source connected again after its stream ended or failed (watch: resumed with Last-Event-ID; nats: a failed fetch), by source and kind.",
		}, []string{"source", "kind"}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_adapter_relists_total",
			Help: "Lists a source started from, by kind and reason: start (a watch's first), expired (410: the watch position fell behind retention), failed (an event could not be handled, or a NATS consumer was created anew).",
		}, []string{"kind", "reason"}),
	}
	r.MustRegister(m.reconciles, m.reconcileSeconds, m.apiRequests, m.externalRequests, m.polls, m.dependents, m.lastPoll,
		m.unchangedReports, m.heldReads,
		m.events, m.eventLag, m.feedPosition, m.reconnects, m.relists,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hyperfleet_adapter_queue_depth",
			Help: "Keys waiting in the work queue (not counting delayed retries).",
		}, g.queueDepth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hyperfleet_adapter_cached_reports",
			Help: "Resources whose last report this replica keeps (forgotten when the resource is removed).",
		}, g.cachedReports),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hyperfleet_adapter_live",
			Help: "1 while the replica's own loops are alive (/healthz answers 200), else 0.",
		}, g.live),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hyperfleet_adapter_ready",
			Help: "1 while the replica can do its work (/readyz answers 200: work listed, the API and the external system reachable, the adapter's checks pass), else 0.",
		}, g.ready))
	return m
}

// externalTransport counts and logs every call to an external system.
type externalTransport struct {
	system  string
	base    http.RoundTripper
	metrics *metrics
	log     *slog.Logger
	// reached records whether each call showed the system reachable, for /readyz.
	reached func(system string, reached bool, detail string)
}

func (t *externalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.metrics.externalRequests.WithLabelValues(t.system, code).Inc()
	if req.Context().Err() == nil { // a call this adapter gave up on says nothing about the system
		reached, detail := reachedSystem(resp, err)
		t.reached(t.system, reached, detail)
	}
	t.log.LogAttrs(req.Context(), slog.LevelDebug, "external call", slog.String("system", t.system),
		slog.String("method", req.Method), slog.String("host", req.URL.Host), slog.String("path", req.URL.Path),
		slog.String("code", code), slog.Duration("duration", time.Since(start)))
	return resp, err
}
