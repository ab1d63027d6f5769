// Package aggregate computes a resource's aggregated status (phase and conditions) from its adapters' latest
// status reports, as the contract's "Aggregation (compute on write)" section defines it.
//
// Everything here is a pure function of its Input: no I/O, no clock reads (the caller passes Now), no
// package-level state. The cost is O(reports + required adapters) of one resource, never O(fleet), so the API can
// call Compute inside the status write's transaction while holding the resource row lock.
package aggregate

import (
	"fmt"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Result is a resource's aggregated status: its phase and its aggregated conditions.
type Result struct {
	Phase      conditions.Phase
	Conditions []conditions.Condition
}

// Report is one adapter's latest stored status report about a resource.
type Report struct {
	Adapter            string
	ObservedGeneration int64
	ObservedTime       time.Time
	// Conditions includes Available (required by the API), maybe Health, Applied, Finalized and adapter-specific
	// ones. Types are unique per report; if not, the first of a type counts.
	Conditions []conditions.Condition
}

// Input is everything the aggregate of one resource depends on.
type Input struct {
	// Generation is the resource's current generation.
	Generation int64
	// Deleting is true once the resource has been marked for deletion.
	Deleting bool
	// Required lists the kind's required adapters in config order; the per-adapter conditions and the adapter
	// names in messages follow this order. A repeated name counts once.
	Required []string
	// Reports holds the latest report per adapter, required or not; reports of adapters that are not required are
	// ignored. There should be at most one per adapter; if there are more, the highest ObservedGeneration wins,
	// then the latest ObservedTime, then the first in the slice.
	Reports []Report
	// Previous is the resource's current aggregated conditions, read for their last_transition_time.
	Previous []conditions.Condition
	// Now stamps last_updated_time, and last_transition_time of conditions that are new or changed status.
	Now time.Time
}

// Compute returns the resource's aggregated status.
//
// With no required adapters the conditions are an empty, non-nil slice and the phase is Ready (Deleting when
// in.Deleting). Otherwise the conditions are, in this order: Ready, Available, then one conditions.AdapterAvailable(adapter)
// condition per required adapter in in.Required order. Each condition's LastUpdatedTime is in.Now; its
// LastTransitionTime is kept from the in.Previous condition of the same type when that had the same status, and
// is in.Now otherwise.
//
// The phase is Deleting if in.Deleting; else Ready if Ready is True; else Degraded if some required adapter
// reports Available=False and Health=False at in.Generation; else Pending if no required adapter has reported at
// in.Generation; else Progressing.
//
// The result depends only on in; the order of in.Reports and in.Previous does not matter (given at most one
// report per adapter and one previous condition per type).
func Compute(in Input) Result {
	adapters := collect(in)
	if len(adapters) == 0 {
		return Result{Phase: phase(in, true, nil), Conditions: []conditions.Condition{}}
	}

	conds := make([]conditions.Condition, 0, len(adapters)+2)
	ready := readyCondition(in.Generation, adapters)
	conds = append(conds, ready, availableCondition(adapters))
	for i := range adapters {
		conds = append(conds, adapterCondition(&adapters[i]))
	}
	for i := range conds {
		stamp(&conds[i], in.Previous, in.Now)
	}
	return Result{Phase: phase(in, ready.Status == conditions.True, adapters), Conditions: conds}
}

// Finalized reports whether every required adapter has reported Finalized=True at observed_generation ==
// in.Generation, which is when the API may hard-delete a deleting resource. Finalized=True at an older generation
// does not count: it predates the delete, which bumped the generation. With no required adapters it is true.
func Finalized(in Input) bool {
	adapters := collect(in)
	for i := range adapters {
		a := &adapters[i]
		if a.report == nil || a.report.ObservedGeneration != in.Generation {
			return false
		}
		if c, ok := conditions.Find(a.report.Conditions, conditions.Finalized); !ok || c.Status != conditions.True {
			return false
		}
	}
	return true
}

// adapter is one required adapter with its latest report (nil if it has never reported) and that report's
// Available condition, normalised so that a missing or malformed one reads as Unknown.
type adapter struct {
	name      string
	report    *Report
	available conditions.Condition
	// hasAvailable is false when the report lacks an Available condition.
	hasAvailable bool
}

// collect returns the required adapters, deduplicated, in in.Required order, each paired with its report.
func collect(in Input) []adapter {
	if len(in.Required) == 0 {
		return nil
	}
	index := make(map[string]int, len(in.Required))
	adapters := make([]adapter, 0, len(in.Required))
	for _, name := range in.Required {
		if _, dup := index[name]; dup {
			continue
		}
		index[name] = len(adapters)
		adapters = append(adapters, adapter{name: name})
	}
	for i := range in.Reports {
		r := &in.Reports[i]
		j, ok := index[r.Adapter]
		if !ok {
			continue // not a required adapter: stored, but not part of the aggregate
		}
		if cur := adapters[j].report; cur == nil || newer(r, cur) {
			adapters[j].report = r
		}
	}
	for i := range adapters {
		a := &adapters[i]
		if a.report == nil {
			continue
		}
		a.available, a.hasAvailable = conditions.Find(a.report.Conditions, conditions.Available)
		if !a.hasAvailable || !a.available.Status.Valid() {
			// Not knowing is not being available: an absent or garbled Available must never make Ready True.
			a.available.Status = conditions.Unknown
		}
	}
	return adapters
}

// newer reports whether r should replace cur as an adapter's latest report; only used when the caller broke the
// one-report-per-adapter promise, so that the result still does not depend on slice order.
func newer(r, cur *Report) bool {
	if r.ObservedGeneration != cur.ObservedGeneration {
		return r.ObservedGeneration > cur.ObservedGeneration
	}
	return r.ObservedTime.After(cur.ObservedTime)
}

func readyCondition(generation int64, adapters []adapter) conditions.Condition {
	var missing, notReady []string
	for i := range adapters {
		a := &adapters[i]
		switch {
		case a.report == nil:
			missing = append(missing, a.name)
		case a.report.ObservedGeneration != generation || a.available.Status != conditions.True:
			notReady = append(notReady, describe(a, generation))
		}
	}
	c := conditions.Condition{Type: conditions.Ready, ObservedGeneration: generation}
	switch {
	case len(missing) > 0:
		c.Status, c.Reason = conditions.False, conditions.ReasonAdaptersMissing
		c.Message = "no report from: " + strings.Join(missing, ", ")
		if len(notReady) > 0 {
			c.Message += "; not ready: " + strings.Join(notReady, ", ")
		}
	case len(notReady) > 0:
		c.Status, c.Reason = conditions.False, conditions.ReasonAdaptersNotReady
		c.Message = "not ready: " + strings.Join(notReady, ", ")
	default:
		c.Status, c.Reason = conditions.True, conditions.ReasonAllAdaptersReady
		c.Message = fmt.Sprintf("all %d required adapters are Available at generation %d", len(adapters), generation)
	}
	return c
}

func availableCondition(adapters []adapter) conditions.Condition {
	var missing, unavailable []string
	lowest := int64(-1)
	for i := range adapters {
		a := &adapters[i]
		if a.report == nil {
			missing = append(missing, a.name)
			continue
		}
		if lowest < 0 || a.report.ObservedGeneration < lowest {
			lowest = a.report.ObservedGeneration
		}
		if a.available.Status != conditions.True {
			// Its own generation: the Available condition ignores how far behind an adapter is.
			unavailable = append(unavailable, describe(a, a.report.ObservedGeneration))
		}
	}
	c := conditions.Condition{Type: conditions.Available, ObservedGeneration: lowest}
	switch {
	case len(missing) > 0:
		// An adapter that never reported has observed no generation.
		c.ObservedGeneration = 0
		c.Status, c.Reason = conditions.False, conditions.ReasonAdaptersMissing
		c.Message = "no report from: " + strings.Join(missing, ", ")
		if len(unavailable) > 0 {
			c.Message += "; unavailable: " + strings.Join(unavailable, ", ")
		}
	case len(unavailable) > 0:
		c.Status, c.Reason = conditions.False, conditions.ReasonAdaptersUnavailable
		c.Message = "unavailable: " + strings.Join(unavailable, ", ")
	default:
		c.Status, c.Reason = conditions.True, conditions.ReasonAllAdaptersAvailable
		c.Message = fmt.Sprintf("all %d required adapters are Available", len(adapters))
	}
	return c
}

// describe names a reported adapter and why it falls short, e.g. "a (observed generation 1 of 2, Available=False:
// Boom)". The report falls short when it is behind generation or not Available=True.
func describe(a *adapter, generation int64) string {
	var why []string
	if a.report.ObservedGeneration != generation {
		why = append(why, fmt.Sprintf("observed generation %d of %d", a.report.ObservedGeneration, generation))
	}
	if a.available.Status != conditions.True {
		s := "Available=" + string(a.available.Status)
		switch {
		case !a.hasAvailable:
			s += ": no Available condition"
		case a.available.Reason != "":
			s += ": " + a.available.Reason
		}
		why = append(why, s)
	}
	return a.name + " (" + strings.Join(why, ", ") + ")"
}

// adapterCondition mirrors one required adapter's Available condition.
func adapterCondition(a *adapter) conditions.Condition {
	c := conditions.Condition{Type: conditions.AdapterAvailable(a.name), Status: conditions.Unknown}
	switch {
	case a.report == nil:
		c.Reason = conditions.ReasonNotReported
		c.Message = "adapter " + a.name + " has not reported"
	case !a.hasAvailable:
		c.Reason = conditions.ReasonAvailableConditionMissing
		c.Message = "the report of adapter " + a.name + " has no Available condition"
		c.ObservedGeneration = a.report.ObservedGeneration
	default:
		c.Status, c.Reason, c.Message = a.available.Status, a.available.Reason, a.available.Message
		c.ObservedGeneration = a.report.ObservedGeneration
	}
	return c
}

// stamp sets the condition's times. A linear scan of previous beats building a map: a resource has a handful of
// aggregated conditions.
func stamp(c *conditions.Condition, previous []conditions.Condition, now time.Time) {
	c.LastUpdatedTime = now
	c.LastTransitionTime = now
	// A zero previous time is not a real transition time, so it is replaced rather than carried forward.
	if p, ok := conditions.Find(previous, c.Type); ok && p.Status == c.Status && !p.LastTransitionTime.IsZero() {
		c.LastTransitionTime = p.LastTransitionTime
	}
}

func phase(in Input, ready bool, adapters []adapter) conditions.Phase {
	switch {
	case in.Deleting:
		return conditions.PhaseDeleting
	case ready:
		return conditions.PhaseReady
	}
	current := false
	for i := range adapters {
		a := &adapters[i]
		if a.report == nil || a.report.ObservedGeneration != in.Generation {
			continue
		}
		current = true
		if h, ok := conditions.Find(a.report.Conditions, conditions.Health); ok && h.Status == conditions.False &&
			a.available.Status == conditions.False {
			return conditions.PhaseDegraded
		}
	}
	if !current {
		return conditions.PhasePending
	}
	return conditions.PhaseProgressing
}
