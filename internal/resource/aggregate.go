package resource

import (
	"time"

	"github.com/hyperfleet/hyperfleet/internal/aggregate"
)

// Aggregate computes r's aggregated status from its stored reports (package aggregate's Compute) and reports
// whether every required adapter of d has finalized it at its current generation. Placeholder rows (observed
// generation 0: a required adapter that has not reported yet) are not reports.
func Aggregate(d *Descriptor, r *Resource, reports []AdapterStatus, now time.Time) (Status, bool) {
	in := aggregate.Input{Generation: r.Generation, Deleting: r.Deleting(), Required: d.RequiredAdapters, Previous: r.Status.Conditions, Now: now}
	for i := range reports {
		if st := &reports[i]; st.ObservedGeneration == 0 {
			continue
		}
		st := &reports[i]
		in.Reports = append(in.Reports, aggregate.Report{Adapter: st.Adapter, ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Conditions: st.Conditions})
	}
	res := aggregate.Compute(in)
	return Status{Phase: res.Phase, Conditions: res.Conditions}, aggregate.Finalized(in)
}
