package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Reconciler is what an adapter author writes. Both methods are called with the resource fetched fresh from the
// API, or as the watch event that queued the reconcile brought it; the runtime posts their outcome as the adapter's status report at the generation it fetched.
// Reconcile is never called for a resource whose spec.paused is true: the runtime reports it paused instead (see
// Paused); Finalize is called whether paused or not.
type Reconciler interface {
	// Reconcile makes the external system match obj's spec.
	Reconcile(ctx context.Context, obj *Object) (Outcome, error)
	// Finalize cleans up after a deleting obj; the resource is removed once Outcome.Finalized is true.
	Finalize(ctx context.Context, obj *Object) (Outcome, error)
}

// Object is one resource as the API returned it, with the adapter's own last report about it.
type Object struct {
	Kind       string // "Cluster"
	ID         string
	ParentID   string // the parent's id for a child kind (a node pool's cluster), empty for a root kind
	Name       string
	Generation int64
	Labels     map[string]string
	Spec       json.RawMessage
	// DeletedTime is set when the resource is being deleted: the runtime calls Finalize instead of Reconcile.
	DeletedTime *time.Time
	// Phase and Conditions are the resource's aggregated status, as the API computed it from every adapter.
	Phase      conditions.Phase
	Conditions []conditions.Condition
	// Parent is the parent resource of a child kind, fetched with it; nil for a root kind.
	Parent *Object
	// LastReport is this adapter's previous report about the resource, nil if it has never reported.
	LastReport *Report
}

// Report is an adapter's stored report, as the API returned it.
type Report struct {
	ObservedGeneration int64
	ObservedTime       time.Time
	Conditions         []conditions.Condition
	Data               map[string]any
}

// Condition returns the report's condition of type t, or nil.
func (r *Report) Condition(t string) *conditions.Condition {
	if r == nil {
		return nil
	}
	for i := range r.Conditions {
		if r.Conditions[i].Type == t {
			return &r.Conditions[i]
		}
	}
	return nil
}

// DataString returns the report's data[key] when it is a string.
func (r *Report) DataString(key string) string {
	if r == nil {
		return ""
	}
	s, _ := r.Data[key].(string)
	return s
}

// Outcome is what a reconcile found and did. The runtime adds Applied and Health (and Finalized for Finalize)
// from the error the reconciler returned.
type Outcome struct {
	// Available says whether what the adapter provides for this resource works; the API requires it. Left
	// empty, it is False with the error's reason (or Unknown when there was no error).
	// Its Type may be left empty.
	Available conditions.Reported
	// Conditions are the adapter's own (e.g. ImageResolved), with types and reasons the adapter declares as
	// constants; any that repeats a type the runtime reports is dropped.
	Conditions []conditions.Reported
	// Data is the report's free-form data.
	Data map[string]any
	// Finalized is Finalize's answer: nothing is left to clean up.
	Finalized bool
	// RequeueAfter asks for another reconcile after this long; when set it wins over the error backoff.
	RequeueAfter time.Duration
}

// Error classes. A reconciler wraps an error with Terminal when retrying cannot help (an invalid spec, a 422 from
// Kubernetes): the runtime reports it and waits for a new generation. Every other error is transient: reported,
// then retried with per-key exponential backoff.
var (
	ErrTerminal  = errors.New("terminal")
	ErrTransient = errors.New("transient")
)

// classified is an error with a class and the reason to report.
type classified struct {
	class  error
	reason string
	err    error
}

func (e *classified) Error() string        { return e.err.Error() }
func (e *classified) Unwrap() []error      { return []error{e.class, e.err} }
func (e *classified) Is(target error) bool { return target == e.class }

// Terminal marks err as not worth retrying; reason (a CamelCase word) goes into the Health condition.
func Terminal(reason string, err error) error {
	return &classified{class: ErrTerminal, reason: reason, err: err}
}

// Transient marks err as worth retrying with backoff, with reason for the Health condition.
func Transient(reason string, err error) error {
	return &classified{class: ErrTransient, reason: reason, err: err}
}

// Terminalf is Terminal with a formatted error.
func Terminalf(reason, format string, args ...any) error {
	return Terminal(reason, fmt.Errorf(format, args...))
}

// ErrorReason returns the reason the runtime reports for err (in Applied and Health): the reason given to
// Terminal or Transient, else TerminalError or TransientError.
func ErrorReason(err error) string { return errorReason(err) }

// errorReason returns the reason to report for err.
func errorReason(err error) string {
	var c *classified
	if errors.As(err, &c) && c.reason != "" {
		return c.reason
	}
	if errors.Is(err, ErrTerminal) {
		return conditions.ReasonTerminalError
	}
	return conditions.ReasonTransientError
}
