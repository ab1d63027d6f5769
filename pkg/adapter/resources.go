package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Kind is a resource kind as the kind table (api.Kinds) describes it; the runtime reaches every kind through the
// generic client. Get one from VersionStreams, Clusters, NodePools or UpgradeSchedules, or from the table for any
// other; kinds are told apart by Plural.
type Kind = api.Kind

// VersionStreams is the VersionStream kind.
func VersionStreams() *Kind { return api.Kinds().VersionStream }

// UpgradeSchedules is the UpgradeSchedule kind.
func UpgradeSchedules() *Kind { return api.Kinds().UpgradeSchedule }

// Clusters is the Cluster kind.
func Clusters() *Kind { return api.Kinds().Cluster }

// NodePools is the NodePool kind, a child of Clusters.
func NodePools() *Kind { return api.Kinds().NodePool }

// listQuery is what the runtime asks of a list; every kind's list takes the same parameters.
type listQuery struct {
	pendingFor     string
	resyncAfter    time.Duration
	search         string
	order          string
	fields         string
	size           int
	includeDeleted bool
	// after is the cursor of the page before (listPage.next).
	after string
	// watch turns the list into a watch starting after resourceVersion, or after lastEventID when resuming.
	watch                        bool
	resourceVersion, lastEventID string
}

// listPage is one page of a list: its items and the change feed position it reflects (empty from an API without a
// change feed).
type listPage struct {
	items    []listItem
	position string
	// next is the cursor of the next page, empty on the last.
	next string
}

// params returns q as the generic client's list parameters. The runtime always names the fields it reads, so
// answers are sparse pages.
func (q listQuery) params() api.ListParams {
	// The runtime never reads a total: not counting saves the API a query per page.
	p := api.ListParams{Fields: ptr("id,owner_references"), Count: ptr(false)}
	if q.after != "" {
		p.After = &q.after
	}
	if q.pendingFor != "" {
		p.PendingFor = &q.pendingFor
	}
	if q.resyncAfter > 0 {
		p.ResyncAfter = ptr(q.resyncAfter.String())
	}
	if q.search != "" {
		p.Search = &q.search
	}
	if q.order != "" {
		p.Order = &q.order
	}
	if q.fields != "" {
		p.Fields = &q.fields
	}
	if q.size > 0 {
		p.Size = &q.size
	}
	if q.includeDeleted {
		p.IncludeDeleted = ptr(true)
	}
	if q.watch {
		p.Watch = ptr(true)
		if q.resourceVersion != "" {
			p.ResourceVersion = &q.resourceVersion
		}
		if q.lastEventID != "" {
			p.LastEventID = &q.lastEventID
		}
	}
	return p
}

// listItem is what the runtime reads of one item of a sparse list: whatever the query's fields selected.
type listItem struct {
	Key
	Name       string
	Generation int64
	Deleting   bool
	Conditions []conditions.Condition // the resource's aggregated conditions
	Spec       map[string]any
}

// list returns a page of kind's resources (every parent's, for a child kind, when parentID is empty) and the
// change feed position the page reflects.
func (a *API) list(ctx context.Context, kind *Kind, parentID string, q listQuery) (listPage, error) {
	parent := uuid.Nil
	if parentID != "" {
		var err error
		if parent, err = uuid.Parse(parentID); err != nil {
			return listPage{}, fmt.Errorf("%s parent id %q: %w", kind.Name, parentID, ErrNotFound)
		}
	}
	p := q.params()
	page, err := a.sparseList(ctx, kind, parent, &p)
	if err != nil {
		return listPage{}, err
	}
	out := make([]listItem, len(page.Items))
	for i := range page.Items {
		out[i] = sparseItem(kind, &page.Items[i])
	}
	return listPage{items: out, position: page.ResourceVersion, next: deref(page.Next)}, nil
}

// sparseList returns a sparse page of kind's resources (under parent, or every parent's when it is uuid.Nil).
func (a *API) sparseList(ctx context.Context, kind *Kind, parent uuid.UUID, p *api.ListParams) (*api.SparseList, error) {
	answer, err := api.ReadAnswer[api.SparseList](a.plain.ListResources(ctx, kind, parent, p))
	if err := check(ctx, answer, err); err != nil {
		return nil, err
	}
	// The runtime always asks for fields; a full page means the server ignored them.
	if api.MediaType(answer.HTTPResponse) != api.SparseMediaType {
		return nil, fmt.Errorf("hyperfleet-api list %s: the answer is not a sparse page (%s)", kind.Plural, api.SparseMediaType)
	}
	return answer.JSON200, nil
}

// sparseItem reads one resource of a sparse page or of a watch event.
func sparseItem(kind *Kind, r *api.SparseResource) listItem {
	it := listItem{Key: Key{Kind: kind.Plural, ID: r.Id.String()}, Name: deref(r.Name), Generation: deref(r.Generation),
		Deleting: r.DeletedTime != nil}
	if r.OwnerReferences != nil {
		it.ParentID = r.OwnerReferences.Id.String()
	}
	if r.Status != nil {
		it.Conditions = conditionsOf(r.Status.Conditions)
	}
	if r.Spec != nil {
		it.Spec = *r.Spec
	}
	return it
}

// watch opens kind's list as a watch (q.watch set) and returns the answer unread: a stream of Server-Sent Events,
// or a problem. Every parent's resources are watched for a child kind.
func (a *API) watch(ctx context.Context, kind *Kind, q listQuery) (*http.Response, error) {
	p := q.params()
	return a.stream.ListResources(ctx, kind, uuid.Nil, &p, func(_ context.Context, req *http.Request) error {
		req.Header.Set("Accept", "text/event-stream")
		return nil
	})
}

// get returns one resource.
func (a *API) get(ctx context.Context, kind *Kind, r api.ResourceRef) (*Object, error) {
	answer, err := api.ReadAnswer[api.Resource](a.plain.GetResource(ctx, kind, r))
	if err := check(ctx, answer, err); err != nil {
		return nil, err
	}
	v := answer.JSON200
	raw, err := json.Marshal(v.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s spec: %w", kind.Name, err)
	}
	obj := &Object{Kind: kind.Name, ID: v.Id.String(), Name: v.Name, Generation: v.Generation, Labels: v.Labels, Spec: raw,
		DeletedTime: v.DeletedTime, Phase: conditions.Phase(v.Status.Phase), Conditions: conditionsOf(v.Status.Conditions)}
	if v.OwnerReferences != nil {
		obj.ParentID = v.OwnerReferences.Id.String()
	}
	return obj, nil
}

// statuses returns the adapters' reports about one resource.
func (a *API) statuses(ctx context.Context, kind *Kind, r api.ResourceRef) ([]api.AdapterStatus, error) {
	answer, err := api.ReadAnswer[api.AdapterStatusList](a.plain.ListResourceStatuses(ctx, kind, r))
	if err := check(ctx, answer, err); err != nil {
		return nil, err
	}
	return answer.JSON200.Items, nil
}

// putStatus stores the adapter's report about one resource.
func (a *API) putStatus(ctx context.Context, kind *Kind, r api.ResourceRef, report api.AdapterStatusReport) error {
	answer, err := api.ReadAnswer[api.AdapterStatus](a.plain.PutResourceStatus(ctx, kind, r, report))
	return check(ctx, answer, err)
}
