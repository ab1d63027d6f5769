package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// HistoryAction says what an entry of a resource's history records.
type HistoryAction string

// The history's actions. A change of deletion protection is an update like any other: its Changes hold
// {"deletion_protection": …}, so that one entry per PATCH says everything the PATCH changed.
const (
	HistoryCreated  HistoryAction = "created"  // Changes: the whole {labels, spec}
	HistoryUpdated  HistoryAction = "updated"  // Changes: the merge patch of {labels, spec, deletion_protection}
	HistoryDeleting HistoryAction = "deleting" // marked for deletion (the resource itself or an ancestor)
	HistoryStatus   HistoryAction = "status"   // the aggregate's phase changed; Reports caused it
	HistoryRemoved  HistoryAction = "removed"  // gone: finalized by its adapters (or an ancestor was)
	// HistoryForceDeleted is a removal by force-delete, of the resource or an ancestor.
	HistoryForceDeleted HistoryAction = "force_deleted"
)

// HistoryEntry is one change of one resource, kept apart from the change feed and longer (the API's
// --history-retention), and kept after the resource itself is gone.
type HistoryEntry struct {
	// Seq orders the entries: a resource's come in the order its changes committed.
	Seq        int64
	Time       time.Time
	Actor      string // the caller's name (an adapter's for a status entry)
	Action     HistoryAction
	Generation int64 // the resource's generation after the change
	// Changes is an RFC 7386 merge patch of {labels, spec, deletion_protection} from before the change to after
	// it (the whole {labels, spec} for a create); nil when the entry changed none of them.
	Changes json.RawMessage
	// PhaseFrom and PhaseTo are the aggregate's phase before and after, when the change moved it (empty when it
	// did not; a create has only PhaseTo).
	PhaseFrom, PhaseTo conditions.Phase
	// Reports are the adapter reports that moved the phase (a status entry).
	Reports []HistoryReport
}

// HistoryReport is an adapter's report as a history entry keeps it: what it said, not its data.
type HistoryReport struct {
	Adapter            string
	ObservedGeneration int64
	Conditions         []conditions.Condition
}

// MaxHistoryPage bounds the entries one read of a history returns.
const MaxHistoryPage = 1000

// History returns up to limit (1 to MaxHistoryPage) entries of the history of the resource id of kind d (under
// parentID when set) after sequence after (0: from the start), oldest first. The history outlives the resource:
// it is read by id whether or not the resource still exists. CodeNotFound when the caller sees no entry of it —
// a resource of another tenant answers exactly as one that never existed.
func (s *Service) History(ctx context.Context, d *Descriptor, parentID, id string, after int64, limit int) ([]HistoryEntry, error) {
	if err := checkIDs(d, parentID, id); err != nil {
		return nil, err
	}
	if after < 0 || limit < 1 || limit > MaxHistoryPage {
		return nil, Errorf(CodeBadListParam, "a history page starts after a sequence number of 0 or more and holds 1 to %d entries", MaxHistoryPage)
	}
	return s.store.History(unconfined(ctx, d), d, parentID, id, after, limit)
}

// historyDoc is what an update's merge patch is computed over.
type historyDoc struct {
	Labels             map[string]string `json:"labels"`
	Spec               json.RawMessage   `json:"spec"`
	DeletionProtection bool              `json:"deletion_protection"`
}

func historyDocOf(r *Resource) historyDoc {
	return historyDoc{Labels: r.Labels, Spec: r.Spec, DeletionProtection: r.DeletionProtection}
}

// changesBetween returns the merge patch that takes before to after's {labels, spec, deletion_protection}.
func changesBetween(before historyDoc, after *Resource) (json.RawMessage, error) {
	a, err := json.Marshal(before)
	if err != nil {
		return nil, fmt.Errorf("encode the resource before the change: %w", err)
	}
	b, err := json.Marshal(historyDocOf(after))
	if err != nil {
		return nil, fmt.Errorf("encode the resource after the change: %w", err)
	}
	patch, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("compute the change's merge patch: %w", err)
	}
	return patch, nil
}

// phaseMove returns from and to when the phase moved, else two empty phases.
func phaseMove(from, to conditions.Phase) (conditions.Phase, conditions.Phase) {
	if from == to {
		return "", ""
	}
	return from, to
}

// statusEntry is the history entry of a report that moved r's phase from `from`.
func statusEntry(r *Resource, from conditions.Phase, actor string, st *AdapterStatus) HistoryEntry {
	return HistoryEntry{Time: st.LastReportTime, Actor: actor, Action: HistoryStatus, Generation: r.Generation,
		PhaseFrom: from, PhaseTo: r.Status.Phase,
		Reports: []HistoryReport{{Adapter: st.Adapter, ObservedGeneration: st.ObservedGeneration, Conditions: st.Conditions}}}
}
