package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/google/uuid"
)

// The generic client: every operation of every kind, given its Kind. The document spells each operation once per
// kind, with the same parameters, bodies and answers at paths that differ only by the kind's plural
// (/{plural}[/{id}[/statuses|/force-delete|/history]], children under /{parent plural}/{parent id}/). So the request of
// any kind is the generated request of the Cluster operation, moved to the kind's path: the generated code
// encodes the parameters, headers and bodies, and the Client's doer and request editors send it.
// TestGenericRequestsAreTheGeneratedOnes checks this against every kind's generated operations.

// BasePath is the path of the API below the server URL; the kinds' paths follow it.
const BasePath = "/api/hyperfleet/v1"

// SparseMediaType is the media type of a list answered with only the fields it asked for (SparseList).
const SparseMediaType = "application/vnd.hyperfleet.sparse+json"

// ListParams are a list's parameters, the same for every kind: each kind's generated List…Params converts to and
// from it.
type ListParams = ListClustersParams

// PatchParams are a patch's parameters, the same for every kind.
type PatchParams = PatchClusterParams

// ListResources lists kind k: under parent for a child kind, or every parent's when parent is uuid.Nil. With
// params.Watch the answer is a stream of Server-Sent Events (ask for text/event-stream with a request editor).
func (c *Client) ListResources(ctx context.Context, k *Kind, parent uuid.UUID, params *ListParams, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewListClustersRequest(c.Server, params)
	return c.sendAt(ctx, req, err, k.CollectionPath(parent), reqEditors)
}

// CreateResourceWithBody creates a resource of kind k (under parent for a child kind) from a body of contentType.
func (c *Client) CreateResourceWithBody(ctx context.Context, k *Kind, parent uuid.UUID, contentType string, body io.Reader, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewCreateClusterRequestWithBody(c.Server, nil, contentType, body)
	return c.sendAt(ctx, req, err, k.CollectionPath(parent), reqEditors)
}

// CreateResource creates a resource of kind k (under parent for a child kind).
func (c *Client) CreateResource(ctx context.Context, k *Kind, parent uuid.UUID, body ResourceCreate, reqEditors ...RequestEditorFn) (*http.Response, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.CreateResourceWithBody(ctx, k, parent, "application/json", bytes.NewReader(raw), reqEditors...)
}

// GetResource reads one resource.
func (c *Client) GetResource(ctx context.Context, k *Kind, r ResourceRef, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewGetClusterRequest(c.Server, r.ID)
	return c.sendAt(ctx, req, err, k.ResourcePath(r), reqEditors)
}

// PatchResourceWithBody changes one resource with a merge patch of contentType (application/merge-patch+json or
// application/json).
func (c *Client) PatchResourceWithBody(ctx context.Context, k *Kind, r ResourceRef, params *PatchParams, contentType string, body io.Reader, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewPatchClusterRequestWithBody(c.Server, r.ID, params, contentType, body)
	return c.sendAt(ctx, req, err, k.ResourcePath(r), reqEditors)
}

// DeleteResource marks one resource (and its children) for deletion.
func (c *Client) DeleteResource(ctx context.Context, k *Kind, r ResourceRef, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewDeleteClusterRequest(c.Server, r.ID)
	return c.sendAt(ctx, req, err, k.ResourcePath(r), reqEditors)
}

// ForceDeleteResource removes one resource and everything under it at once (admin only).
func (c *Client) ForceDeleteResource(ctx context.Context, k *Kind, r ResourceRef, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewForceDeleteClusterRequest(c.Server, r.ID)
	return c.sendAt(ctx, req, err, k.ResourcePath(r)+"/force-delete", reqEditors)
}

// ListResourceStatuses reads the adapters' latest reports about one resource.
func (c *Client) ListResourceStatuses(ctx context.Context, k *Kind, r ResourceRef, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewListClusterStatusesRequest(c.Server, r.ID)
	return c.sendAt(ctx, req, err, k.ResourcePath(r)+"/statuses", reqEditors)
}

// PutResourceStatus stores an adapter's report about one resource.
func (c *Client) PutResourceStatus(ctx context.Context, k *Kind, r ResourceRef, body AdapterStatusReport, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewPutClusterStatusRequest(c.Server, r.ID, body)
	return c.sendAt(ctx, req, err, k.ResourcePath(r)+"/statuses", reqEditors)
}

// HistoryParams are a history read's parameters, the same for every kind.
type HistoryParams = ListClusterHistoryParams

// ListResourceHistory reads a page of one resource's history, which outlives it.
func (c *Client) ListResourceHistory(ctx context.Context, k *Kind, r ResourceRef, params *HistoryParams, reqEditors ...RequestEditorFn) (*http.Response, error) {
	req, err := NewListClusterHistoryRequest(c.Server, r.ID, params)
	return c.sendAt(ctx, req, err, k.ResourcePath(r)+"/history", reqEditors)
}

// sendAt moves a generated request to path (below BasePath on the client's server), applies the request editors
// and sends it, as the generated operations do.
func (c *Client) sendAt(ctx context.Context, req *http.Request, err error, path string, reqEditors []RequestEditorFn) (*http.Response, error) {
	if err != nil {
		return nil, err
	}
	server, err := url.Parse(c.Server)
	if err != nil {
		return nil, err
	}
	at, err := server.Parse("." + BasePath + path)
	if err != nil {
		return nil, err
	}
	req.URL.Path, req.URL.RawPath = at.Path, at.RawPath
	req = req.WithContext(ctx)
	if err := c.applyEditors(ctx, req, reqEditors); err != nil {
		return nil, err
	}
	return c.Client.Do(req)
}

// Answer is an answer read whole, with its document decoded when it was a success of the expected media type.
type Answer[T any] struct {
	Body         []byte
	HTTPResponse *http.Response
	// JSON200 is the decoded document of a 2xx answer (JSON, or the sparse media type for a sparse list); nil
	// otherwise.
	JSON200 *T
}

// StatusCode is the answer's HTTP status.
func (a *Answer[T]) StatusCode() int { return a.HTTPResponse.StatusCode }

// Problem decodes the answer's problem+json document; nil when it is not one.
func (a *Answer[T]) Problem() *Problem {
	if a.HTTPResponse.StatusCode < 300 {
		return nil
	}
	var p Problem
	if MediaType(a.HTTPResponse) != "application/problem+json" || json.Unmarshal(a.Body, &p) != nil || p.Code == "" {
		return nil
	}
	return &p
}

// ReadAnswer reads a response of the generic client whole (closing it) and decodes a success into T. It returns
// the error of a request that got no answer, and an error when a success does not decode; an answer other than a
// success is returned with JSON200 nil, for the caller to read (Problem).
func ReadAnswer[T any](rsp *http.Response, err error) (*Answer[T], error) {
	if err != nil {
		return nil, err
	}
	defer func() { _ = rsp.Body.Close() }()
	body, err := io.ReadAll(rsp.Body)
	if err != nil {
		return nil, err
	}
	a := &Answer[T]{Body: body, HTTPResponse: rsp}
	if rsp.StatusCode < 200 || rsp.StatusCode > 299 || len(body) == 0 {
		return a, nil
	}
	mt := MediaType(rsp)
	if mt != "application/json" && mt != SparseMediaType {
		return a, nil
	}
	var doc T
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decode the answer (%s): %w", mt, err)
	}
	a.JSON200 = &doc
	return a, nil
}

// MediaType is the media type of an answer's Content-Type, without its parameters ("" when it has none that
// parses).
func MediaType(rsp *http.Response) string {
	mt, _, err := mime.ParseMediaType(rsp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}
