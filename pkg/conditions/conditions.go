// Package conditions is HyperFleet's one condition vocabulary: the condition types, statuses, reasons and phases
// that adapters report and that the API aggregates, and the pure rules a status report must follow.
//
// It imports only the standard library, so that every side can share it without pulling in the other: the API's
// domain (package resource), its storage (package postgres, whose SQL names these constants), the aggregation
// maths (package aggregate) and the adapter runtime, which validates its own reports before posting them.
package conditions

import (
	"strings"
	"time"
	"unicode"
)

// Status is a condition's status, as in Kubernetes.
type Status string

// The condition statuses.
const (
	True    Status = "True"
	False   Status = "False"
	Unknown Status = "Unknown"
)

// Valid reports whether s is one of True, False and Unknown.
func (s Status) Valid() bool { return s == True || s == False || s == Unknown }

// Condition types that every adapter reports and that the API aggregates.
const (
	// Available is required in every report: whether what the adapter provides for the resource works. The API
	// also aggregates it: True iff every required adapter's latest report is Available=True, whatever its
	// generation (the last known good).
	Available = "Available"
	// Ready is aggregated only: True iff every required adapter is Available at the resource's current generation.
	Ready = "Ready"
	// Health says whether the adapter's last reconcile went well; Health=False together with Available=False at the
	// current generation makes the resource Degraded.
	Health = "Health"
	// Applied says whether the adapter has applied the spec. The aggregate does not read it.
	Applied = "Applied"
	// Finalized, True at a deleting resource's generation, tells the API the adapter has cleaned up; once every
	// required adapter has said so the resource is removed.
	Finalized = "Finalized"
	// Paused is True in every report an adapter makes while the resource's spec.paused is true: the adapter
	// acted on nothing and repeats what it last knew. It is absent otherwise. The aggregate does not read it, so
	// pausing leaves Ready and the phase as the carried-over Available and Health make them.
	Paused = "Paused"
)

// Reasons of the aggregated conditions.
const (
	// ReasonAllAdaptersReady is Ready=True's reason.
	ReasonAllAdaptersReady = "AllAdaptersReady"
	// ReasonAdaptersNotReady is Ready=False's reason when every required adapter has reported but some report is
	// behind the generation or not Available=True.
	ReasonAdaptersNotReady = "AdaptersNotReady"
	// ReasonAdaptersMissing is the reason of Ready=False and Available=False when some required adapter has never
	// reported. It wins over ReasonAdaptersNotReady and ReasonAdaptersUnavailable.
	ReasonAdaptersMissing = "AdaptersMissing"
	// ReasonAllAdaptersAvailable is Available=True's reason.
	ReasonAllAdaptersAvailable = "AllAdaptersAvailable"
	// ReasonAdaptersUnavailable is Available=False's reason when every required adapter has reported but some
	// latest report is not Available=True.
	ReasonAdaptersUnavailable = "AdaptersUnavailable"
	// ReasonNotReported is the reason of a per-adapter aggregated condition (status Unknown) whose adapter has not
	// reported, and of an adapter's own Available when its reconciler said nothing about it.
	ReasonNotReported = "NotReported"
	// ReasonAvailableConditionMissing is the reason of a per-adapter aggregated condition (status Unknown) whose
	// adapter's report carries no Available condition: stored data that predates or bypassed validation.
	ReasonAvailableConditionMissing = "AvailableConditionMissing"
)

// Reasons the adapter runtime gives on the conditions it owns (Available when the reconciler failed, Applied,
// Health, Finalized).
const (
	ReasonReconciled      = "Reconciled"
	ReasonFinalized       = "Finalized"
	ReasonFinalizing      = "Finalizing"
	ReasonTransientError  = "TransientError"
	ReasonTerminalError   = "TerminalError"
	ReasonReconcilerPanic = "ReconcilerPanic"
	// ReasonInvalidReport marks a report the runtime sent instead of one the API would have refused.
	ReasonInvalidReport = "InvalidReport"
	// ReasonPaused is the reason of Paused=True, and of Applied=False while the resource is paused.
	ReasonPaused = "Paused"
)

// Phase is a resource's summarised state.
type Phase string

// The phases, in the contract's words.
const (
	PhasePending     Phase = "Pending"
	PhaseProgressing Phase = "Progressing"
	PhaseReady       Phase = "Ready"
	PhaseDegraded    Phase = "Degraded"
	PhaseDeleting    Phase = "Deleting"
)

// Condition is one Kubernetes-style condition as the API stores and returns it: a reported condition stamped with
// the generation it was observed at and the times of its last transition and update.
type Condition struct {
	Type               string    `json:"type"`
	Status             Status    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	ObservedGeneration int64     `json:"observed_generation,omitempty"`
	LastTransitionTime time.Time `json:"last_transition_time"`
	LastUpdatedTime    time.Time `json:"last_updated_time"`
}

// Reported is a condition as an adapter reports it; the API keeps its times.
type Reported struct {
	Type    string
	Status  Status
	Reason  string
	Message string
}

// Find returns the first condition of type t in conds.
func Find(conds []Condition, t string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// IsTrue reports whether the first condition of type t in conds has status True.
func IsTrue(conds []Condition, t string) bool {
	c, ok := Find(conds, t)
	return ok && c.Status == True
}

// availableSuffix ends every per-adapter aggregated condition type.
const availableSuffix = Available

// AdapterAvailable returns the type of the aggregated condition that mirrors one required adapter's Available: the
// adapter name split on '-', '_' and '.', each non-empty part's first letter upper-cased (the rest kept as is),
// joined, and suffixed with "Available". "version-resolver" gives "VersionResolverAvailable" and
// "hostedcluster-applier" gives "HostedclusterApplierAvailable".
func AdapterAvailable(adapter string) string {
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
