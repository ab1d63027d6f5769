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

// Kind is a resource kind as the runtime reads it through the generated client. Get one from VersionStreams,
// Clusters, NodePools or UpgradeSchedules; kinds are told apart by Plural.
//
// The generated client has one method per operation and kind, so each kind binds its methods here, once; the rest
// of the runtime is generic over kinds.
type Kind struct {
	Name   string // "Cluster"
	Plural string // "clusters", as in the API's paths
	Parent *Kind  // a child kind's parent (NodePool → Cluster); nil for a root kind
	ops    kindOps
}

// kindOps are a kind's calls on the generated client.
type kindOps struct {
	// list returns a page of the kind's resources (every parent's, for a child kind, when parentID is empty) and
	// the change feed position the page reflects.
	list func(ctx context.Context, c *api.ClientWithResponses, parentID string, q listQuery) (listPage, error)
	// watch opens the list as a watch (q.watch set) and returns the answer unread: a stream of Server-Sent
	// Events, or a problem. Every parent's resources are watched for a child kind.
	watch     func(ctx context.Context, c api.ClientInterface, q listQuery) (*http.Response, error)
	get       func(ctx context.Context, c *api.ClientWithResponses, r ref) (*Object, error)
	statuses  func(ctx context.Context, c *api.ClientWithResponses, r ref) ([]api.AdapterStatus, error)
	putStatus func(ctx context.Context, c *api.ClientWithResponses, r ref, report api.AdapterStatusReport) error
}

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

// params returns q as the generated client's list parameters. Every kind's parameter struct has the same fields,
// so this one converts to the others. The runtime always names the fields it reads, so answers are sparse pages.
func (q listQuery) params() api.ListClustersParams {
	// The runtime never reads a total: not counting saves the API a query per page.
	p := api.ListClustersParams{Fields: ptr("id,owner_references"), Count: ptr(false)}
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

// meta is what every kind's resource has, taken from a generated type.
type meta struct {
	id         uuid.UUID
	parent     *api.ObjectReference
	name       string
	generation int64
	labels     api.Labels
	deleted    *time.Time
	status     api.ResourceStatus
}

func (m meta) object(kind *Kind, spec any) (*Object, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s spec: %w", kind.Name, err)
	}
	obj := &Object{Kind: kind.Name, ID: m.id.String(), Name: m.name, Generation: m.generation, Labels: m.labels, Spec: raw,
		DeletedTime: m.deleted, Phase: conditions.Phase(m.status.Phase), Conditions: conditionsOf(m.status.Conditions)}
	if m.parent != nil {
		obj.ParentID = m.parent.Id.String()
	}
	return obj, nil
}

// sparseItems reads a sparse page (the runtime always asks for fields); a full page means the server ignored them.
func sparseItems(kind *Kind, page *api.SparseList) (listPage, error) {
	if page == nil {
		return listPage{}, fmt.Errorf("hyperfleet-api list %s: the answer is not a sparse page (%s)", kind.Plural, sparseMediaType)
	}
	out := make([]listItem, len(page.Items))
	for i := range page.Items {
		out[i] = sparseItem(kind, &page.Items[i])
	}
	return listPage{items: out, position: page.ResourceVersion, next: deref(page.Next)}, nil
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

// acceptEventStream asks for a watch's answer as Server-Sent Events.
func acceptEventStream(_ context.Context, req *http.Request) error {
	req.Header.Set("Accept", "text/event-stream")
	return nil
}

// sparseMediaType is the media type of a list answered with only the fields asked for.
const sparseMediaType = "application/vnd.hyperfleet.sparse+json"

// VersionStreams is the VersionStream kind.
func VersionStreams() *Kind {
	k := &Kind{Name: "VersionStream", Plural: "versionstreams"}
	metaOf := func(v *api.VersionStream) meta {
		return meta{id: v.Id, name: v.Name, generation: v.Generation, labels: v.Labels, deleted: v.DeletedTime, status: v.Status}
	}
	k.ops = kindOps{
		list: func(ctx context.Context, c *api.ClientWithResponses, _ string, q listQuery) (listPage, error) {
			p := api.ListVersionStreamsParams(q.params())
			resp, err := c.ListVersionStreamsWithResponse(ctx, &p)
			if err != nil {
				return listPage{}, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return listPage{}, err
			}
			return sparseItems(k, resp.ApplicationvndHyperfleetSparseJSON200)
		},
		watch: func(ctx context.Context, c api.ClientInterface, q listQuery) (*http.Response, error) {
			p := api.ListVersionStreamsParams(q.params())
			return c.ListVersionStreams(ctx, &p, acceptEventStream)
		},
		get: func(ctx context.Context, c *api.ClientWithResponses, r ref) (*Object, error) {
			resp, err := c.GetVersionStreamWithResponse(ctx, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return metaOf(resp.JSON200).object(k, resp.JSON200.Spec)
		},
		statuses: func(ctx context.Context, c *api.ClientWithResponses, r ref) ([]api.AdapterStatus, error) {
			resp, err := c.ListVersionStreamStatusesWithResponse(ctx, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return resp.JSON200.Items, nil
		},
		putStatus: func(ctx context.Context, c *api.ClientWithResponses, r ref, report api.AdapterStatusReport) error {
			resp, err := c.PutVersionStreamStatusWithResponse(ctx, r.id, report)
			if err != nil {
				return sendFailed(ctx, err)
			}
			return check(ctx, resp.HTTPResponse, resp.Body)
		},
	}
	return k
}

// UpgradeSchedules is the UpgradeSchedule kind.
func UpgradeSchedules() *Kind {
	k := &Kind{Name: "UpgradeSchedule", Plural: "upgradeschedules"}
	metaOf := func(v *api.UpgradeSchedule) meta {
		return meta{id: v.Id, name: v.Name, generation: v.Generation, labels: v.Labels, deleted: v.DeletedTime, status: v.Status}
	}
	k.ops = kindOps{
		list: func(ctx context.Context, c *api.ClientWithResponses, _ string, q listQuery) (listPage, error) {
			p := api.ListUpgradeSchedulesParams(q.params())
			resp, err := c.ListUpgradeSchedulesWithResponse(ctx, &p)
			if err != nil {
				return listPage{}, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return listPage{}, err
			}
			return sparseItems(k, resp.ApplicationvndHyperfleetSparseJSON200)
		},
		watch: func(ctx context.Context, c api.ClientInterface, q listQuery) (*http.Response, error) {
			p := api.ListUpgradeSchedulesParams(q.params())
			return c.ListUpgradeSchedules(ctx, &p, acceptEventStream)
		},
		get: func(ctx context.Context, c *api.ClientWithResponses, r ref) (*Object, error) {
			resp, err := c.GetUpgradeScheduleWithResponse(ctx, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return metaOf(resp.JSON200).object(k, resp.JSON200.Spec)
		},
		statuses: func(ctx context.Context, c *api.ClientWithResponses, r ref) ([]api.AdapterStatus, error) {
			resp, err := c.ListUpgradeScheduleStatusesWithResponse(ctx, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return resp.JSON200.Items, nil
		},
		putStatus: func(ctx context.Context, c *api.ClientWithResponses, r ref, report api.AdapterStatusReport) error {
			resp, err := c.PutUpgradeScheduleStatusWithResponse(ctx, r.id, report)
			if err != nil {
				return sendFailed(ctx, err)
			}
			return check(ctx, resp.HTTPResponse, resp.Body)
		},
	}
	return k
}

// Clusters is the Cluster kind.
func Clusters() *Kind {
	k := &Kind{Name: "Cluster", Plural: "clusters"}
	metaOf := func(v *api.Cluster) meta {
		return meta{id: v.Id, name: v.Name, generation: v.Generation, labels: v.Labels, deleted: v.DeletedTime, status: v.Status}
	}
	k.ops = kindOps{
		list: func(ctx context.Context, c *api.ClientWithResponses, _ string, q listQuery) (listPage, error) {
			p := q.params()
			resp, err := c.ListClustersWithResponse(ctx, &p)
			if err != nil {
				return listPage{}, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return listPage{}, err
			}
			return sparseItems(k, resp.ApplicationvndHyperfleetSparseJSON200)
		},
		watch: func(ctx context.Context, c api.ClientInterface, q listQuery) (*http.Response, error) {
			p := q.params()
			return c.ListClusters(ctx, &p, acceptEventStream)
		},
		get: func(ctx context.Context, c *api.ClientWithResponses, r ref) (*Object, error) {
			resp, err := c.GetClusterWithResponse(ctx, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return metaOf(resp.JSON200).object(k, resp.JSON200.Spec)
		},
		statuses: func(ctx context.Context, c *api.ClientWithResponses, r ref) ([]api.AdapterStatus, error) {
			resp, err := c.ListClusterStatusesWithResponse(ctx, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return resp.JSON200.Items, nil
		},
		putStatus: func(ctx context.Context, c *api.ClientWithResponses, r ref, report api.AdapterStatusReport) error {
			resp, err := c.PutClusterStatusWithResponse(ctx, r.id, report)
			if err != nil {
				return sendFailed(ctx, err)
			}
			return check(ctx, resp.HTTPResponse, resp.Body)
		},
	}
	return k
}

// NodePools is the NodePool kind, a child of Clusters.
func NodePools() *Kind {
	k := &Kind{Name: "NodePool", Plural: "nodepools", Parent: Clusters()}
	metaOf := func(v *api.NodePool) meta {
		return meta{id: v.Id, parent: &v.OwnerReferences, name: v.Name, generation: v.Generation, labels: v.Labels, deleted: v.DeletedTime, status: v.Status}
	}
	k.ops = kindOps{
		list: func(ctx context.Context, c *api.ClientWithResponses, parentID string, q listQuery) (listPage, error) {
			p := q.params()
			if parentID == "" {
				all := api.ListNodePoolsParams(p)
				resp, err := c.ListNodePoolsWithResponse(ctx, &all)
				if err != nil {
					return listPage{}, sendFailed(ctx, err)
				}
				if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
					return listPage{}, err
				}
				return sparseItems(k, resp.ApplicationvndHyperfleetSparseJSON200)
			}
			parent, err := uuid.Parse(parentID)
			if err != nil {
				return listPage{}, fmt.Errorf("cluster id %q: %w", parentID, ErrNotFound)
			}
			under := api.ListClusterNodePoolsParams(p)
			resp, err := c.ListClusterNodePoolsWithResponse(ctx, parent, &under)
			if err != nil {
				return listPage{}, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return listPage{}, err
			}
			return sparseItems(k, resp.ApplicationvndHyperfleetSparseJSON200)
		},
		watch: func(ctx context.Context, c api.ClientInterface, q listQuery) (*http.Response, error) {
			p := api.ListNodePoolsParams(q.params())
			return c.ListNodePools(ctx, &p, acceptEventStream)
		},
		get: func(ctx context.Context, c *api.ClientWithResponses, r ref) (*Object, error) {
			resp, err := c.GetNodePoolWithResponse(ctx, r.parent, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return metaOf(resp.JSON200).object(k, resp.JSON200.Spec)
		},
		statuses: func(ctx context.Context, c *api.ClientWithResponses, r ref) ([]api.AdapterStatus, error) {
			resp, err := c.ListNodePoolStatusesWithResponse(ctx, r.parent, r.id)
			if err != nil {
				return nil, sendFailed(ctx, err)
			}
			if err := check(ctx, resp.HTTPResponse, resp.Body); err != nil {
				return nil, err
			}
			return resp.JSON200.Items, nil
		},
		putStatus: func(ctx context.Context, c *api.ClientWithResponses, r ref, report api.AdapterStatusReport) error {
			resp, err := c.PutNodePoolStatusWithResponse(ctx, r.parent, r.id, report)
			if err != nil {
				return sendFailed(ctx, err)
			}
			return check(ctx, resp.HTTPResponse, resp.Body)
		},
	}
	return k
}
