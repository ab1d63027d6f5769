package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// What a required adapter still has to do on a resource that is pending for it (the pending column that
// pending_for reads), as the operation label of the pending metrics says it.
const (
	// PendingCreate: the adapter has never reported on the resource (its placeholder row, observed generation 0).
	PendingCreate = "create"
	// PendingUpdate: the adapter reported on an older generation than the resource's.
	PendingUpdate = "update"
	// PendingDelete: the resource is deleting and the adapter has not finalized it (Finalized=True at the
	// deleting generation).
	PendingDelete = "delete"
)

// pendingOperations are the operation label's values, in the order the series are exported.
func pendingOperations() []string { return []string{PendingCreate, PendingUpdate, PendingDelete} }

// DefaultPendingThresholds are the ages NewPendingCollector counts pending resources beyond when given none.
func DefaultPendingThresholds() []time.Duration {
	return []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}
}

// pendingCountTimeout bounds the statement a scrape runs. It is longer than the phase count's: after an adapter's
// outage the pending rows are many, and each update among them looks up when its generation began.
const pendingCountTimeout = 3 * time.Second

// PendingConfig configures NewPendingCollector.
type PendingConfig struct {
	// Every is how often the statement runs again (0: DefaultPhaseCountEvery); scrapes in between export the last
	// result.
	Every time.Duration
	// Thresholds are the ages of hyperfleet_pending_resources_longer_than (nil: DefaultPendingThresholds); whole
	// seconds, at least one second each.
	Thresholds []time.Duration
}

// PendingCollector exports, per kind, required adapter and operation (create, update, delete), how many resources
// are pending for the adapter, how many of them longer than each threshold, and the age of the oldest. Pending is
// the definition pending_for uses (the generated pending column of adapter_statuses), so these count exactly what
// the adapters' polls are asked to do; an adapter that is not required is not counted. The age is measured from
// when the work began: the adapter's row was created (create: with the resource, or when the adapter became
// required), the resource's deletion (delete), or the resource's first history entry at a generation newer than
// the adapter observed (update; the resource's last write when retention removed that entry, which can only make
// the age look younger). One statement, over the partial index of pending rows, answers every kind; it runs at most
// once per Every (snapshot).
type PendingCollector struct {
	counts     *snapshot[[]pendingRow]
	required   [][2]string // kind, adapter
	thresholds []string    // the threshold label's values, in ascending order
	pending    *prometheus.Desc
	longer     *prometheus.Desc
	oldest     *prometheus.Desc
	counted    *prometheus.Desc
}

// pendingRow is one group of the statement's result: the resources pending for an adapter and operation whose age
// falls in one bucket (the number of thresholds they exceed), and the oldest age among them in seconds.
type pendingRow struct {
	Kind      string
	Adapter   string
	Operation string
	Bucket    int
	N         int64
	Oldest    float64
}

var _ prometheus.Collector = (*PendingCollector)(nil)

// NewPendingCollector returns the collector over the given kinds' required adapters, or an error when a threshold
// is not a positive whole number of seconds.
func NewPendingCollector(store *Store, kinds []*resource.Descriptor, cfg PendingConfig) (*PendingCollector, error) {
	every := cfg.Every
	if every <= 0 {
		every = DefaultPhaseCountEvery
	}
	thresholds := slices.Compact(slices.Sorted(slices.Values(cfg.Thresholds)))
	if thresholds == nil {
		thresholds = DefaultPendingThresholds()
	}
	c := &PendingCollector{
		pending: prometheus.NewDesc("hyperfleet_pending_resources",
			"Resources a required adapter still has to act on (what pending_for lists), by kind, adapter and operation (create: never reported; update: a newer generation than reported; delete: not finalized).",
			[]string{"kind", "adapter", "operation"}, nil),
		longer: prometheus.NewDesc("hyperfleet_pending_resources_longer_than",
			"Resources pending for a required adapter for longer than threshold, by kind, adapter and operation.",
			[]string{"kind", "adapter", "operation", "threshold"}, nil),
		oldest: prometheus.NewDesc("hyperfleet_pending_oldest_age_seconds",
			"How long the resource pending longest for a required adapter has been pending, by kind, adapter and operation (0: none pending).",
			[]string{"kind", "adapter", "operation"}, nil),
		counted: prometheus.NewDesc("hyperfleet_pending_counted_timestamp_seconds",
			"When the exported hyperfleet_pending_* values were taken (0: never); older than the scrape when the count failed.", nil, nil),
	}
	seconds := make([]string, len(thresholds))
	for i, t := range thresholds {
		if t < time.Second || t%time.Second != 0 {
			return nil, fmt.Errorf("pending threshold %s: want a whole number of seconds, at least 1s", t)
		}
		seconds[i] = strconv.FormatInt(int64(t/time.Second), 10)
		c.thresholds = append(c.thresholds, thresholdLabel(t))
	}
	var parts []string
	var args []any
	for _, d := range kinds {
		if len(d.RequiredAdapters) == 0 {
			continue
		}
		for _, a := range d.RequiredAdapters {
			c.required = append(c.required, [2]string{d.Kind, a})
		}
		// Kind and table names come from the descriptors built in main, not from requests; adapter names are DNS
		// labels, so the array literal needs no quoting (it is still a parameter).
		parts = append(parts, `SELECT s.kind, s.adapter,
				CASE WHEN s.resource_deleting THEN '`+PendingDelete+`' WHEN s.observed_generation = 0 THEN '`+PendingCreate+`'
					ELSE '`+PendingUpdate+`' END AS operation,
				extract(epoch FROM now() - greatest(s.created_time, CASE
					WHEN s.resource_deleting THEN coalesce(r.deleted_time, r.updated_time)
					WHEN s.observed_generation = 0 THEN s.created_time
					ELSE coalesce((SELECT h.time FROM resource_history h WHERE h.resource_id = s.resource_id
						AND h.generation > s.observed_generation ORDER BY h.seq LIMIT 1), r.updated_time) END))::float8 AS age
			FROM adapter_statuses s JOIN `+d.Table+` r ON r.id = s.resource_id
			WHERE s.kind = '`+d.Kind+`' AND s.pending AND s.adapter = ANY(?::text[])`)
		args = append(args, "{"+strings.Join(d.RequiredAdapters, ",")+"}")
	}
	take := func(context.Context) ([]pendingRow, error) { return nil, nil }
	if len(parts) > 0 {
		// Materialized, so that each row's age (and the history lookup behind it) is computed once for both the
		// bucket and the oldest. width_bucket counts the thresholds an age has reached: 0 below the first,
		// len(thresholds) past the last.
		query := `WITH pending AS MATERIALIZED (` + strings.Join(parts, " UNION ALL ") + `)
			SELECT kind, adapter, operation, width_bucket(age, ?::float8[]) AS bucket, count(*) AS n, max(age) AS oldest
			FROM pending GROUP BY 1, 2, 3, 4`
		args = append(args, "{"+strings.Join(seconds, ",")+"}")
		take = func(ctx context.Context) ([]pendingRow, error) {
			var rows []pendingRow
			if err := rawScan(store.db.WithContext(ctx).Raw(query, args...), &rows); err != nil {
				return nil, fmt.Errorf("count pending resources: %w", err)
			}
			return rows, nil
		}
	}
	c.counts = &snapshot[[]pendingRow]{every: every, timeout: pendingCountTimeout, take: take,
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_pending_count_errors_total",
			Help: "Scrapes whose count of pending resources failed or timed out (the previous values were exported)."})}
	return c, nil
}

// thresholdLabel spells a threshold as the label shows it: "90s", "5m", "1h".
func thresholdLabel(t time.Duration) string {
	switch {
	case t%time.Hour == 0:
		return strconv.FormatInt(int64(t/time.Hour), 10) + "h"
	case t%time.Minute == 0:
		return strconv.FormatInt(int64(t/time.Minute), 10) + "m"
	default:
		return strconv.FormatInt(int64(t/time.Second), 10) + "s"
	}
}

// Describe implements prometheus.Collector.
func (c *PendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.longer
	ch <- c.oldest
	ch <- c.counted
	c.counts.errors.Describe(ch)
}

// pendingTotals are one kind, adapter and operation's values.
type pendingTotals struct {
	n      int64
	longer []int64 // per threshold
	oldest float64
}

// Collect implements prometheus.Collector. Every required adapter of every kind has its series, zero when nothing
// is pending, so that an alert compares numbers rather than tells a missing series from a healthy one.
func (c *PendingCollector) Collect(ch chan<- prometheus.Metric) {
	rows, at := c.counts.get()
	totals := map[[3]string]*pendingTotals{}
	for _, kv := range c.required {
		for _, op := range pendingOperations() {
			totals[[3]string{kv[0], kv[1], op}] = &pendingTotals{longer: make([]int64, len(c.thresholds))}
		}
	}
	for _, r := range rows {
		t := totals[[3]string{r.Kind, r.Adapter, r.Operation}]
		if t == nil {
			continue
		}
		t.n += r.N
		for i := 0; i < r.Bucket && i < len(t.longer); i++ {
			t.longer[i] += r.N
		}
		// A clock that ran ahead of the database's when a row was written makes a negative age: none yet.
		t.oldest = max(t.oldest, r.Oldest, 0)
	}
	for _, kv := range c.required {
		for _, op := range pendingOperations() {
			t := totals[[3]string{kv[0], kv[1], op}]
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(t.n), kv[0], kv[1], op)
			for i, label := range c.thresholds {
				ch <- prometheus.MustNewConstMetric(c.longer, prometheus.GaugeValue, float64(t.longer[i]), kv[0], kv[1], op, label)
			}
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, t.oldest, kv[0], kv[1], op)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.counted, prometheus.GaugeValue, unixSeconds(at))
	c.counts.errors.Collect(ch)
}
