package hostedcluster

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the applier's own series, beside the runtime's; each carries the adapter label (see
// adapter.Runner.Registerer). The kind label is HostedCluster or Secret.
type Metrics struct {
	drift *prometheus.CounterVec
	// swept and wouldSweep count orphaned objects deleted, and those --sweep-dry-run only listed.
	swept, wouldSweep *prometheus.CounterVec
	// orphans is how many objects this replica's last sweep found labelled for a cluster the API does not know.
	orphans *prometheus.GaugeVec
}

// NewMetrics registers the applier's series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_hostedcluster_drift_corrected_total",
			Help: "Objects set back to what the applier applied after a change it did not make (a hand edit), by kind.",
		}, []string{"kind"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_hostedcluster_orphans_swept_total",
			Help: "Objects labelled for a cluster the API does not know (404) deleted after the grace period, by kind.",
		}, []string{"kind"}),
		wouldSweep: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperfleet_hostedcluster_orphans_would_sweep_total",
			Help: "Orphaned objects past the grace period that --sweep-dry-run only listed (once each), by kind.",
		}, []string{"kind"}),
		orphans: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperfleet_hostedcluster_orphans",
			Help: "Objects labelled for a cluster the API does not know, as this replica's last sweep found them (in their grace period or due), by kind.",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.drift, m.swept, m.wouldSweep, m.orphans} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// drifted counts a drift set back; nil counts nothing.
func (m *Metrics) drifted(kind string) {
	if m != nil {
		m.drift.WithLabelValues(kind).Inc()
	}
}
