// Package resource is HyperFleet's domain: the generic resource, its kind descriptor, the domain error type and
// the Service that applies the API's rules (names, labels, spec validation, generations, merge patches) on top of
// a transactional Store. It knows nothing of SQL or HTTP.
package resource

import (
	"encoding/json"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Status is the resource's aggregated state, computed by the API from adapter reports.
type Status struct {
	Phase      conditions.Phase
	Conditions []conditions.Condition
	// RawConditions, when not nil, holds the conditions as stored JSON instead of Conditions. Reads that only
	// pass a resource on to a client get it so, because decoding every condition of a page of resources only
	// to encode it again costs more than the rest of the request.
	RawConditions json.RawMessage
}

// Resource is one stored resource of any kind.
type Resource struct {
	ID       string
	Kind     string
	Name     string
	ParentID string // empty for a root kind
	// Tenant owns the resource (DefaultTenant for a global kind's). Set at creation from the caller; never changes.
	Tenant string
	// DeletionProtection, while true, makes deletes and force-deletes fail; only a PATCH that clears it lifts it.
	DeletionProtection bool
	Labels             map[string]string
	// RawLabels, when not nil, holds the labels as stored JSON instead of Labels: reads that only pass them on
	// (lists, gets) do not decode them.
	RawLabels   json.RawMessage
	Spec        json.RawMessage // a JSON object
	Generation  int64           // counts spec changes: what adapters observe
	Version     int64           // counts every write of the resource (labels, spec, status, deletion): its ETag
	Status      Status
	CreatedTime time.Time
	UpdatedTime time.Time
	CreatedBy   string
	UpdatedBy   string
	DeletedTime *time.Time
	DeletedBy   string
	// AdapterStatuses is set by a list with ListOptions.Statuses only: the reports of those adapters that have
	// reported on the resource, by adapter name (empty, not nil, when none has).
	AdapterStatuses []AdapterStatus
}

// Deleting reports whether the resource has been marked for deletion.
func (r *Resource) Deleting() bool { return r.DeletedTime != nil }

// ListOptions selects a page of resources of one kind.
type ListOptions struct {
	ParentID       string // only children of this parent; empty for all
	Page           int    // 1-based
	Size           int
	Search         string // TSL
	Order          []OrderBy
	IncludeDeleted bool
	// PendingFor, when set, keeps only resources that adapter must look at: it has not reported on them yet,
	// reported an older generation, has not finalized a deleting one, or (with ResyncAfter) last reported
	// longer ago than ResyncAfter.
	PendingFor  string
	ResyncAfter time.Duration
	// IDs, when not nil, keeps only these resources (a watch fetching the resources of a batch of events).
	IDs []string
	// After, when set, is the cursor of the page before (ListResult.Next): the page starts after its last item,
	// whatever was inserted or deleted since; Page is then 1.
	After string
	// NoCount skips counting the matches (ListResult.Counted false).
	NoCount bool
	// EstimateCount lets the store answer a large count with the planner's estimate instead of reading every
	// match (ListResult.Estimated); a small one is still exact.
	EstimateCount bool
	// Borrow says each does not keep a resource's raw JSON (Spec, RawLabels, RawConditions) after it returns, so
	// the store may hand it over in place rather than copy every row's (the bulk of a page's allocations).
	Borrow bool
	// WithoutInternal asks for specs without their internal fields, for callers who may not see them; only for
	// a kind whose Spec.InternalPaths are ok.
	WithoutInternal bool
	// SearchPublic says the caller may not see internal spec fields: a Search naming one (or a field inside one)
	// is refused exactly as one naming an unknown field is, so that a filter cannot reveal what the answer hides.
	SearchPublic bool
	// KeysOnly says each needs only a resource's id and ordering keys (a watch learning which resources match its
	// filter): the store may leave labels, spec and conditions empty rather than read them.
	KeysOnly bool
	// Statuses names adapters (at most MaxListStatuses) whose reports each listed resource carries
	// (Resource.AdapterStatuses), read with the page rather than once per resource.
	Statuses []string
}

// MaxListStatuses is how many adapters a list may ask the reports of (ListOptions.Statuses).
const MaxListStatuses = 8

// ListResult is what a list says besides its items.
type ListResult struct {
	// Total is the number of matches, when Counted.
	Total   int64
	Counted bool
	// Estimated says Total is the planner's estimate (ListOptions.EstimateCount), not a count.
	Estimated bool
	// Next is the cursor of the next page, empty when this page was the last.
	Next string
}

// OrderBy is one sort key.
type OrderBy struct {
	Field string
	Desc  bool
}
