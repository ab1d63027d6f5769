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
	"unicode"

	"github.com/hyperfleet/hyperfleet/pkg/resource"
)

// Condition types that adapters report and that the aggregate produces.
const (
	// ConditionReady is the aggregated condition that is True iff every required adapter is Available at the
	// resource's current generation.
	ConditionReady = "Ready"
	// ConditionAvailable is both the condition every adapter report must carry and the aggregated condition that
	// is True iff every required adapter's latest report is Available, whatever its generation.
	ConditionAvailable = "Available"
	// ConditionHealth is an optional adapter condition; Health=False together with Available=False at the current
	// generation makes the resource Degraded.
	ConditionHealth = "Health"
	// ConditionApplied is an optional adapter condition saying the adapter has applied the spec. The aggregate does
	// not read it; it is named here so that adapters share one spelling.
	ConditionApplied = "Applied"
	// ConditionFinalized is the adapter condition that, True at the deleting resource's generation, tells the API
	// the adapter has cleaned up.
	ConditionFinalized = "Finalized"
)

// availableSuffix ends every per-adapter aggregated condition type (see ConditionType).
const availableSuffix = "Available"

// Reasons on the aggregated conditions.
const (
	// ReasonAllAdaptersReady is Ready=True's reason.
	ReasonAllAdaptersReady = "AllAdaptersReady"
	// ReasonAdaptersNotReady is Ready=False's reason when every required adapter has reported but some report is
	// behind the generation or not Available=True.
	ReasonAdaptersNotReady = "AdaptersNotReady"
	// ReasonAdaptersMissing is the reason of Ready=False and Available=False when some required adapter has never
	// reported. It wins over ReasonAdaptersNotReady and ReasonAdaptersUnavailable; the message then names both the
	// missing and the failing adapters.
	ReasonAdaptersMissing = "AdaptersMissing"
	// ReasonAllAdaptersAvailable is Available=True's reason.
	ReasonAllAdaptersAvailable = "AllAdaptersAvailable"
	// ReasonAdaptersUnavailable is Available=False's reason when every required adapter has reported but some
	// latest report is not Available=True.
	ReasonAdaptersUnavailable = "AdaptersUnavailable"
	// ReasonNotReported is the reason of a per-adapter condition (status Unknown) whose adapter has not reported.
	ReasonNotReported = "NotReported"
	// ReasonAvailableConditionMissing is the reason of a per-adapter condition (status Unknown) whose adapter's
	// report carries no Available condition. The API rejects such reports, so this marks stored data that predates
	// or bypassed that check rather than a normal state.
	ReasonAvailableConditionMissing = "AvailableConditionMissing"
)

// Report is one adapter's latest stored status report about a resource.
type Report struct {
	Adapter            string
	ObservedGeneration int64
	ObservedTime       time.Time
	// Conditions includes Available (required by the API), maybe Health, Applied, Finalized and adapter-specific
	// ones. Types are unique per report; if not, the first of a type counts.
	Conditions []resource.Condition
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
	Previous []resource.Condition
	// Now stamps last_updated_time, and last_transition_time of conditions that are new or changed status.
	Now time.Time
}

// Compute returns the resource's aggregated status.
//
// With no required adapters the conditions are an empty, non-nil slice and the phase is Ready (Deleting when
// in.Deleting). Otherwise the conditions are, in this order: Ready, Available, then one ConditionType(adapter)
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
func Compute(in Input) resource.Status {
	adapters := collect(in)
	if len(adapters) == 0 {
		return resource.Status{Phase: phase(in, true, nil), Conditions: []resource.Condition{}}
	}

	conds := make([]resource.Condition, 0, len(adapters)+2)
	ready := readyCondition(in.Generation, adapters)
	conds = append(conds, ready, availableCondition(adapters))
	for _, a := range adapters {
		conds = append(conds, adapterCondition(a))
	}
	for i := range conds {
		stamp(&conds[i], in.Previous, in.Now)
	}
	return resource.Status{Phase: phase(in, ready.Status == resource.ConditionTrue, adapters), Conditions: conds}
}

// ConditionType returns the aggregated per-adapter condition type of an adapter: the name split on '-', '_' and
// '.', each non-empty part's first letter upper-cased (the rest kept as is), joined, and suffixed with
// "Available". For example "version-resolver" gives "VersionResolverAvailable" and "hostedcluster-applier" gives
// "HostedclusterApplierAvailable".
func ConditionType(adapter string) string {
	var b strings.Builder
	b.Grow(len(adapter) + len(availableSuffix))
	// A manual scan rather than strings.FieldsFunc: this runs once per required adapter on every status write.
	start := true
	for _, r := range adapter {
		switch {
		case r == '-' || r == '_' || r == '.':
			start = true
		case start:
			b.WriteRune(unicode.ToUpper(r))
			start = false
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(availableSuffix)
	return b.String()
}

// Finalized reports whether every required adapter has reported Finalized=True at observed_generation ==
// in.Generation, which is when the API may hard-delete a deleting resource. Finalized=True at an older generation
// does not count: it predates the delete, which bumped the generation. With no required adapters it is true.
func Finalized(in Input) bool {
	for _, a := range collect(in) {
		if a.report == nil || a.report.ObservedGeneration != in.Generation {
			return false
		}
		if c, ok := find(a.report.Conditions, ConditionFinalized); !ok || c.Status != resource.ConditionTrue {
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
	available resource.Condition
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
		a.available, a.hasAvailable = find(a.report.Conditions, ConditionAvailable)
		if !a.hasAvailable || !valid(a.available.Status) {
			// Not knowing is not being available: an absent or garbled Available must never make Ready True.
			a.available.Status = resource.ConditionUnknown
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

// find returns the first condition of type typ.
func find(conds []resource.Condition, typ string) (resource.Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return resource.Condition{}, false
}

func valid(s resource.ConditionStatus) bool {
	return s == resource.ConditionTrue || s == resource.ConditionFalse || s == resource.ConditionUnknown
}

func readyCondition(generation int64, adapters []adapter) resource.Condition {
	var missing, notReady []string
	for _, a := range adapters {
		switch {
		case a.report == nil:
			missing = append(missing, a.name)
		case a.report.ObservedGeneration != generation || a.available.Status != resource.ConditionTrue:
			notReady = append(notReady, describe(a, generation))
		}
	}
	c := resource.Condition{Type: ConditionReady, ObservedGeneration: generation}
	switch {
	case len(missing) > 0:
		c.Status, c.Reason = resource.ConditionFalse, ReasonAdaptersMissing
		c.Message = "no report from: " + strings.Join(missing, ", ")
		if len(notReady) > 0 {
			c.Message += "; not ready: " + strings.Join(notReady, ", ")
		}
	case len(notReady) > 0:
		c.Status, c.Reason = resource.ConditionFalse, ReasonAdaptersNotReady
		c.Message = "not ready: " + strings.Join(notReady, ", ")
	default:
		c.Status, c.Reason = resource.ConditionTrue, ReasonAllAdaptersReady
		c.Message = fmt.Sprintf("all %d required adapters are Available at generation %d", len(adapters), generation)
	}
	return c
}

func availableCondition(adapters []adapter) resource.Condition {
	var missing, unavailable []string
	lowest := int64(-1)
	for _, a := range adapters {
		if a.report == nil {
			missing = append(missing, a.name)
			continue
		}
		if lowest < 0 || a.report.ObservedGeneration < lowest {
			lowest = a.report.ObservedGeneration
		}
		if a.available.Status != resource.ConditionTrue {
			// Its own generation: the Available condition ignores how far behind an adapter is.
			unavailable = append(unavailable, describe(a, a.report.ObservedGeneration))
		}
	}
	c := resource.Condition{Type: ConditionAvailable, ObservedGeneration: lowest}
	switch {
	case len(missing) > 0:
		// An adapter that never reported has observed no generation.
		c.ObservedGeneration = 0
		c.Status, c.Reason = resource.ConditionFalse, ReasonAdaptersMissing
		c.Message = "no report from: " + strings.Join(missing, ", ")
		if len(unavailable) > 0 {
			c.Message += "; unavailable: " + strings.Join(unavailable, ", ")
		}
	case len(unavailable) > 0:
		c.Status, c.Reason = resource.ConditionFalse, ReasonAdaptersUnavailable
		c.Message = "unavailable: " + strings.Join(unavailable, ", ")
	default:
		c.Status, c.Reason = resource.ConditionTrue, ReasonAllAdaptersAvailable
		c.Message = fmt.Sprintf("all %d required adapters are Available", len(adapters))
	}
	return c
}

// describe names a reported adapter and why it falls short, e.g. "a (observed generation 1 of 2, Available=False:
// Boom)". The report falls short when it is behind generation or not Available=True.
func describe(a adapter, generation int64) string {
	var why []string
	if a.report.ObservedGeneration != generation {
		why = append(why, fmt.Sprintf("observed generation %d of %d", a.report.ObservedGeneration, generation))
	}
	if a.available.Status != resource.ConditionTrue {
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
func adapterCondition(a adapter) resource.Condition {
	c := resource.Condition{Type: ConditionType(a.name), Status: resource.ConditionUnknown}
	switch {
	case a.report == nil:
		c.Reason = ReasonNotReported
		c.Message = "adapter " + a.name + " has not reported"
	case !a.hasAvailable:
		c.Reason = ReasonAvailableConditionMissing
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
func stamp(c *resource.Condition, previous []resource.Condition, now time.Time) {
	c.LastUpdatedTime = now
	c.LastTransitionTime = now
	// A zero previous time is not a real transition time, so it is replaced rather than carried forward.
	if p, ok := find(previous, c.Type); ok && p.Status == c.Status && !p.LastTransitionTime.IsZero() {
		c.LastTransitionTime = p.LastTransitionTime
	}
}

func phase(in Input, ready bool, adapters []adapter) resource.Phase {
	switch {
	case in.Deleting:
		return resource.PhaseDeleting
	case ready:
		return resource.PhaseReady
	}
	current := false
	for _, a := range adapters {
		if a.report == nil || a.report.ObservedGeneration != in.Generation {
			continue
		}
		current = true
		if h, ok := find(a.report.Conditions, ConditionHealth); ok && h.Status == resource.ConditionFalse &&
			a.available.Status == resource.ConditionFalse {
			return resource.PhaseDegraded
		}
	}
	if !current {
		return resource.PhasePending
	}
	return resource.PhaseProgressing
}
