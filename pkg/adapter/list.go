package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// MaxListSize is the largest page the API serves, and List's page size when the query names none.
const MaxListSize = 500

// ListQuery selects a page of List.
type ListQuery struct {
	// Search is a TSL filter (the list's search parameter), e.g. "spec.version_stream = 'stable-4-16'".
	Search string
	// Size is the page size, at most MaxListSize; 0 is MaxListSize, so that a pass costs as few requests as can be.
	Size int
	// After is the Next of the page before; empty for the first page.
	After string
	// Statuses names adapters (at most 8) whose reports each item carries in Listed.Reports.
	Statuses []string
	// IncludeDeleted also lists resources that are being deleted (Listed.Deleting).
	IncludeDeleted bool
}

// Listed is one resource of a List page.
type Listed struct {
	ID, Name string
	// ParentID is the parent's id for a child kind, empty for a root kind.
	ParentID   string
	Labels     map[string]string
	Generation int64
	Spec       json.RawMessage
	// Conditions are the resource's aggregated conditions.
	Conditions []conditions.Condition
	Deleting   bool
	// Reports are the reports of the adapters ListQuery.Statuses named that have reported on the resource, by
	// adapter name; nil when the query named none.
	Reports map[string]*Report
}

// ListPage is a page of List.
type ListPage struct {
	Items []Listed
	// Next is the cursor of the next page (ListQuery.After), empty on the last.
	Next string
}

// listFields are the members List reads of each item.
const listFields = "id,name,labels,generation,spec,status,deleted_time,owner_references"

// List returns a page of kind's resources in id order (every parent's for a child kind when parentID is empty),
// with the named adapters' reports on each: one request per page, however many resources and adapters, so that
// a reconciler that reads a stream's clusters and their reports costs requests in proportion to pages. Follow
// Next to the end for every resource; resources created or deleted meanwhile may or may not appear, none is
// listed twice. It returns an *APIError for a refused query (e.g. 400 for a bad search or adapter name).
func (a *API) List(ctx context.Context, kind *Kind, parentID string, q ListQuery) (*ListPage, error) {
	ctx = withOp(ctx, "list")
	parent := uuid.Nil
	if parentID != "" {
		var err error
		if parent, err = uuid.Parse(parentID); err != nil {
			return nil, fmt.Errorf("%s parent id %q: %w", kind.Name, parentID, ErrNotFound)
		}
	}
	size := q.Size
	if size <= 0 {
		size = MaxListSize
	}
	lq := listQuery{search: q.Search, order: "id", fields: listFields, size: size, after: q.After, includeDeleted: q.IncludeDeleted}
	p := lq.params()
	if len(q.Statuses) > 0 {
		p.Statuses = ptr(strings.Join(q.Statuses, ","))
	}
	page, err := a.sparseList(ctx, kind, parent, &p)
	if err != nil {
		return nil, err
	}
	out := &ListPage{Items: make([]Listed, len(page.Items)), Next: deref(page.Next)}
	for i := range page.Items {
		if out.Items[i], err = listedOf(kind, &page.Items[i], len(q.Statuses) > 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listedOf reads one item of List's sparse page; with reports it fills Reports (empty when none reported).
func listedOf(kind *Kind, r *api.SparseResource, reports bool) (Listed, error) {
	it := Listed{ID: r.Id.String(), Name: deref(r.Name), Generation: deref(r.Generation), Deleting: r.DeletedTime != nil}
	if r.OwnerReferences != nil {
		it.ParentID = r.OwnerReferences.Id.String()
	}
	if r.Labels != nil {
		it.Labels = *r.Labels
	}
	if r.Status != nil {
		it.Conditions = conditionsOf(r.Status.Conditions)
	}
	if r.Spec != nil {
		raw, err := json.Marshal(*r.Spec)
		if err != nil {
			return it, fmt.Errorf("encode %s %s spec: %w", kind.Name, it.ID, err)
		}
		it.Spec = raw
	}
	if reports {
		it.Reports = map[string]*Report{}
		if r.AdapterStatuses != nil {
			for i := range *r.AdapterStatuses {
				st := &(*r.AdapterStatuses)[i]
				// Generation 0 is the API's placeholder for a required adapter that has not reported; a list
				// leaves placeholders out already.
				if st.ObservedGeneration > 0 {
					it.Reports[st.Adapter] = reportOf(st)
				}
			}
		}
	}
	return it, nil
}
