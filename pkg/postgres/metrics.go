package postgres

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/pkg/resource"
)

// PhaseCollector exports how many live resources of each kind are in each phase, counted when scraped (one
// grouped query per kind over the phase index).
type PhaseCollector struct {
	store *Store
	kinds []*resource.Descriptor
	desc  *prometheus.Desc
}

var _ prometheus.Collector = (*PhaseCollector)(nil)

// NewPhaseCollector returns a collector over the given kinds.
func NewPhaseCollector(store *Store, kinds []*resource.Descriptor) *PhaseCollector {
	return &PhaseCollector{store: store, kinds: kinds, desc: prometheus.NewDesc("hyperfleet_resources",
		"Resources by kind and phase (deleting ones included, as phase Deleting).", []string{"kind", "phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector; a failed count is reported as an invalid metric, not a panic.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, d := range c.kinds {
		var rows []struct {
			Phase string
			N     int64
		}
		err := c.store.db.WithContext(ctx).Raw("SELECT phase, count(*) AS n FROM " + d.Table + " GROUP BY phase").Scan(&rows).Error
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.desc, err)
			continue
		}
		for _, r := range rows {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(r.N), d.Kind, r.Phase)
		}
	}
}
