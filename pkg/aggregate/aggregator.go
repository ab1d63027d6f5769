package aggregate

import (
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/resource"
)

// Aggregator is the resource.Aggregator the API runs on every write: Compute and Finalized over a resource's
// stored reports.
type Aggregator struct{}

var _ resource.Aggregator = Aggregator{}

// Aggregate implements resource.Aggregator. Placeholder rows (observed generation 0: a required adapter that has
// not reported yet) are not reports.
func (Aggregator) Aggregate(d *resource.Descriptor, r *resource.Resource, reports []resource.AdapterStatus, now time.Time) (resource.Status, bool) {
	in := Input{Generation: r.Generation, Deleting: r.Deleting(), Required: d.RequiredAdapters, Previous: r.Status.Conditions, Now: now}
	for _, st := range reports {
		if st.ObservedGeneration == 0 {
			continue
		}
		in.Reports = append(in.Reports, Report{Adapter: st.Adapter, ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Conditions: st.Conditions})
	}
	return Compute(in), Finalized(in)
}
