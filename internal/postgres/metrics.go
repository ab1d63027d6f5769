package postgres

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// phaseCountTimeout bounds the count a scrape runs: a scrape must answer promptly even when the database does
// not, so that the API's other metrics (and the alert that the database is slow) still get through.
const phaseCountTimeout = time.Second

// DefaultPhaseCountEvery is how often the phase counts are taken again when NewPhaseCollector is given no interval.
const DefaultPhaseCountEvery = 30 * time.Second

// PhaseCollector exports how many resources of each kind are in each phase. The counts are a statement over every
// kind, which /metrics (unauthenticated) must not run on every scrape: a scrape counts afresh only when the last
// count is older than the collector's interval (bounded by phaseCountTimeout, one scrape at a time), and
// otherwise exports the last counts. When a count fails it exports the last counts it got;
// hyperfleet_resources_counted_timestamp_seconds says how old they are.
type PhaseCollector struct {
	store   *Store
	query   string
	every   time.Duration
	desc    *prometheus.Desc
	counted *prometheus.Desc
	errors  prometheus.Counter

	mu    sync.Mutex // held while counting, so that concurrent scrapes count once
	last  []phaseCount
	at    time.Time // of the last successful count
	tried time.Time // of the last attempt
}

type phaseCount struct {
	Kind  string
	Phase string
	N     int64
}

var _ prometheus.Collector = (*PhaseCollector)(nil)

// NewPhaseCollector returns a collector over the given kinds that counts at most once per every
// (DefaultPhaseCountEvery when 0).
func NewPhaseCollector(store *Store, kinds []*resource.Descriptor, every time.Duration) *PhaseCollector {
	if every <= 0 {
		every = DefaultPhaseCountEvery
	}
	parts := make([]string, len(kinds))
	for i, d := range kinds {
		// Kind names come from the descriptors built in main, not from requests.
		parts[i] = "SELECT '" + d.Kind + "' AS kind, phase, count(*) AS n FROM " + d.Table + " GROUP BY phase"
	}
	return &PhaseCollector{
		store: store,
		query: strings.Join(parts, " UNION ALL "),
		every: every,
		desc: prometheus.NewDesc("hyperfleet_resources",
			"Resources by kind and phase (deleting ones included, as phase Deleting).", []string{"kind", "phase"}, nil),
		counted: prometheus.NewDesc("hyperfleet_resources_counted_timestamp_seconds",
			"When the exported hyperfleet_resources counts were taken (0: never); older than the scrape when the count failed.", nil, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_resources_count_errors_total",
			Help: "Scrapes whose resource count failed or timed out (the previous counts were exported)."}),
	}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.counted
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	// A failed count is not retried before the interval either: a stuck database gets one count per interval.
	if c.tried.IsZero() || time.Since(c.tried) >= c.every {
		c.tried = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), phaseCountTimeout)
		var rows []phaseCount
		err := rawScan(c.store.db.WithContext(ctx).Raw(c.query), &rows)
		cancel()
		if err == nil {
			c.last, c.at = rows, time.Now()
		} else {
			c.errors.Inc()
		}
	}
	last, at := c.last, c.at
	c.mu.Unlock()

	for _, r := range last {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(r.N), r.Kind, r.Phase)
	}
	stamp := 0.0
	if !at.IsZero() {
		stamp = float64(at.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.counted, prometheus.GaugeValue, stamp)
	c.errors.Collect(ch)
}
