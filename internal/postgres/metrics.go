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

// snapshot is the last result of a statement that /metrics (unauthenticated) must not run on every scrape: get
// runs it afresh only when the last attempt is older than every (bounded by timeout, one scrape at a time, so that
// concurrent scrapes run it once), and otherwise returns the last result. A failed attempt counts in errors, keeps
// the last result, and is not retried before every either: a stuck database gets one statement per interval.
type snapshot[T any] struct {
	every   time.Duration
	timeout time.Duration
	take    func(ctx context.Context) (T, error)
	errors  prometheus.Counter

	mu    sync.Mutex // held while taking, so that concurrent scrapes take once
	last  T
	at    time.Time // of the last successful take
	tried time.Time // of the last attempt
}

// get returns the last result and when it was taken (zero: never).
func (s *snapshot[T]) get() (T, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tried.IsZero() || time.Since(s.tried) >= s.every {
		s.tried = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		v, err := s.take(ctx)
		cancel()
		if err == nil {
			s.last, s.at = v, time.Now()
		} else {
			s.errors.Inc()
		}
	}
	return s.last, s.at
}

// unixSeconds is t as a Prometheus timestamp gauge's value: 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// PhaseCollector exports how many resources of each kind are in each phase. The counts are a statement over every
// kind, taken at most once per the collector's interval (snapshot). When a count fails it exports the last counts
// it got; hyperfleet_resources_counted_timestamp_seconds says how old they are.
type PhaseCollector struct {
	counts  *snapshot[[]phaseCount]
	desc    *prometheus.Desc
	counted *prometheus.Desc
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
	query := strings.Join(parts, " UNION ALL ")
	return &PhaseCollector{
		counts: &snapshot[[]phaseCount]{every: every, timeout: phaseCountTimeout,
			take: func(ctx context.Context) ([]phaseCount, error) {
				var rows []phaseCount
				err := rawScan(store.db.WithContext(ctx).Raw(query), &rows)
				return rows, err
			},
			errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_resources_count_errors_total",
				Help: "Scrapes whose resource count failed or timed out (the previous counts were exported)."})},
		desc: prometheus.NewDesc("hyperfleet_resources",
			"Resources by kind and phase (deleting ones included, as phase Deleting).", []string{"kind", "phase"}, nil),
		counted: prometheus.NewDesc("hyperfleet_resources_counted_timestamp_seconds",
			"When the exported hyperfleet_resources counts were taken (0: never); older than the scrape when the count failed.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.counted
	c.counts.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	last, at := c.counts.get()
	for _, r := range last {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(r.N), r.Kind, r.Phase)
	}
	ch <- prometheus.MustNewConstMetric(c.counted, prometheus.GaugeValue, unixSeconds(at))
	c.counts.errors.Collect(ch)
}
