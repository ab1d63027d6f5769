package adapter

import (
	"encoding/json"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Paused reports whether obj's spec says `"paused": true` (clusters and node pools have the field). The runtime
// then calls neither Reconcile nor anything else of the reconciler: it posts pausedReport instead. Pausing in the
// runtime rather than in each reconciler is what makes "a paused resource is touched by no adapter" true of every
// adapter, present and future, and of every way work reaches one (poll, watch, NATS, dependents, requeues,
// remediation inside a reconcile).
func Paused(obj *Object) bool {
	var spec struct {
		Paused bool `json:"paused"`
	}
	// A spec that does not decode is not paused: the reconciler then reports it as invalid, which is more useful
	// than silently holding.
	return json.Unmarshal(obj.Spec, &spec) == nil && spec.Paused
}

// pausedMessage is the message of Paused=True and of Applied=False while paused.
const pausedMessage = "spec.paused is true: nothing is applied until it is false; the other conditions and the data are the adapter's last report"

// pausedReport is the report about a paused resource, at its current generation: the adapter's last report
// carried over (Available, Health, its own conditions and data, so that Ready and the phase stay what they were and
// a client still reads the last known version or devices), Applied=False and Paused=True. Without a last report
// (a resource created paused) Available is False and Health True, both with reason Paused: nothing was made, and
// nothing went wrong.
func pausedReport(adapter string, obj *Object, now time.Time, metadata map[string]any) api.AdapterStatusReport {
	available := conditions.Reported{Type: conditions.Available, Status: conditions.False, Reason: conditions.ReasonPaused, Message: pausedMessage}
	health := conditions.Reported{Type: conditions.Health, Status: conditions.True, Reason: conditions.ReasonPaused, Message: pausedMessage}
	last := obj.LastReport
	if c := last.Condition(conditions.Available); c != nil {
		available = asReported(*c)
	}
	if c := last.Condition(conditions.Health); c != nil {
		health = asReported(*c)
	}
	conds := []conditions.Reported{available,
		{Type: conditions.Applied, Status: conditions.False, Reason: conditions.ReasonPaused, Message: pausedMessage},
		health,
		{Type: conditions.Paused, Status: conditions.True, Reason: conditions.ReasonPaused, Message: pausedMessage},
	}
	var (
		carried []conditions.Reported
		data    map[string]any
	)
	if last != nil {
		for _, c := range last.Conditions {
			// Finalized belongs to a deleting resource, which is never paused (Finalize always runs).
			if c.Type != conditions.Finalized {
				carried = append(carried, asReported(c))
			}
		}
		data = last.Data
	}
	return assemble(adapter, obj, appendNew(conds, carried), data, metadata, now)
}

// asReported is a stored condition as it is reported again.
func asReported(c conditions.Condition) conditions.Reported {
	return conditions.Reported{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
}
