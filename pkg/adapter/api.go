package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// API reads and writes hyperfleet-api for the runtime and for reconcilers, through the client generated from
// openapi/openapi.yaml: the contract has one client. Every request carries the adapter's bearer token (re-read when
// its file is rotated) and is counted in the adapter's metrics by operation and status code.
//
// Reconcilers get it from Runner.API to read what their resource depends on, e.g. the applier reads the cluster's
// VersionStream and the version resolver's report on it.
type API struct {
	client *api.ClientWithResponses
	// plain is client's generated client, which the generic operations (resources.go) extend.
	plain *api.Client
	// stream makes the runtime's watch requests: the same transport, but no overall timeout, since a watch's answer
	// lasts as long as the watch (an idle timeout guards it instead; see watchSource).
	stream *api.Client
	token  *tokenFile // nil: no authentication
}

// ErrNotFound matches (errors.Is) an *APIError with status 404, and the error of a look-up by name that found
// nothing.
var ErrNotFound = errors.New("not found")

// APIError is an answer from hyperfleet-api other than success.
type APIError struct {
	Op     string // "get", "put status", …
	Status int
	Code   string // the problem's HYPERFLEET-… code, when it sent one
	Detail string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("hyperfleet-api %s: %d %s %s", e.Op, e.Status, e.Code, e.Detail)
}

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *APIError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// statusStale is the problem code of a report older than the stored one.
const statusStale = "HYPERFLEET-STS-001"

func isStale(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusConflict && e.Code == statusStale
}

// retryable reports whether an API failure may succeed if tried again: the network, timeouts, 408, 429, 5xx.
func retryable(err error) bool {
	var e *APIError
	if !errors.As(err, &e) {
		return true
	}
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// newAPI returns the API at server (e.g. http://localhost:8000; a trailing base path is tolerated) over base.
func newAPI(server string, token *tokenFile, base http.RoundTripper, m *metrics, shard string) (*API, error) {
	transport := &apiTransport{base: base, token: token, metrics: m, shard: shard}
	plain, err := api.NewClient(apiServer(server), api.WithHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: transport}))
	if err != nil {
		return nil, fmt.Errorf("hyperfleet-api client: %w", err)
	}
	stream, err := api.NewClient(apiServer(server), api.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		return nil, fmt.Errorf("hyperfleet-api watch client: %w", err)
	}
	return &API{client: &api.ClientWithResponses{ClientInterface: plain}, plain: plain, stream: stream, token: token}, nil
}

// apiServer returns the server URL the generated client takes: the API's address without the base path, which
// the document's paths include.
func apiServer(url string) string {
	return strings.TrimSuffix(strings.TrimRight(url, "/"), api.BasePath)
}

// Generated returns the generated client, for reads the helpers below do not cover. Its requests are
// authenticated and counted like the runtime's own (under the operation "other").
func (a *API) Generated() *api.ClientWithResponses { return a.client }

// Get returns one resource of kind, without its reports; errors.Is(err, ErrNotFound) when it does not exist.
// parentID is the parent's id for a child kind and empty for a root kind.
func (a *API) Get(ctx context.Context, kind *Kind, parentID, id string) (*Object, error) {
	ref, err := parseRef(kind, parentID, id)
	if err != nil {
		return nil, err
	}
	return a.get(withOp(ctx, "get"), kind, ref)
}

// IDs returns the ids of every resource of kind, deleting ones included, a page of 500 per request: for an adapter
// that must tell what it left behind in its external system from what still exists (the Hivelocity provisioner's
// orphaned devices), at one request per 500 resources rather than one per resource.
func (a *API) IDs(ctx context.Context, kind *Kind) (map[string]bool, error) {
	out := map[string]bool{}
	q := listQuery{size: 500, includeDeleted: true}
	for {
		page, err := a.list(withOp(ctx, "list ids"), kind, "", q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.items {
			out[it.ID] = true
		}
		if page.next == "" || len(page.items) == 0 {
			return out, nil
		}
		q.after = page.next
	}
}

// FindByName returns the live resource of kind with the given name (under parentID for a child kind);
// errors.Is(err, ErrNotFound) when there is none.
func (a *API) FindByName(ctx context.Context, kind *Kind, parentID, name string) (*Object, error) {
	if !conditions.ValidAdapterName(name) { // resource names are DNS labels too; anything else cannot match
		return nil, fmt.Errorf("%s %q: %w", kind.Name, name, ErrNotFound)
	}
	page, err := a.list(withOp(ctx, "find"), kind, parentID, listQuery{search: "name = '" + name + "'", size: 1, fields: "id,owner_references"})
	if err != nil {
		return nil, err
	}
	if len(page.items) == 0 {
		return nil, fmt.Errorf("%s %q: %w", kind.Name, name, ErrNotFound)
	}
	return a.Get(ctx, kind, page.items[0].ParentID, page.items[0].ID)
}

// Report returns adapter's stored report about a resource of kind, or nil if it has not reported; the error
// matches ErrNotFound when the resource does not exist.
func (a *API) Report(ctx context.Context, kind *Kind, parentID, id, adapter string) (*Report, error) {
	st, err := a.status(withOp(ctx, "get report"), kind, parentID, id, adapter)
	if st == nil || err != nil {
		return nil, err
	}
	return reportOf(st), nil
}

// status returns the stored report of adapter about the resource, or nil.
func (a *API) status(ctx context.Context, kind *Kind, parentID, id, adapter string) (*api.AdapterStatus, error) {
	ref, err := parseRef(kind, parentID, id)
	if err != nil {
		return nil, err
	}
	all, err := a.statuses(ctx, kind, ref)
	if err != nil {
		return nil, err
	}
	for i := range all {
		// Generation 0 is the API's placeholder for a required adapter that has not reported.
		if all[i].Adapter == adapter && all[i].ObservedGeneration > 0 {
			return &all[i], nil
		}
	}
	return nil, nil
}

func reportOf(st *api.AdapterStatus) *Report {
	r := &Report{ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Data: st.Data}
	r.Conditions = conditionsOf(st.Conditions)
	return r
}

func conditionsOf(in []api.Condition) []conditions.Condition {
	out := make([]conditions.Condition, len(in))
	for i, c := range in {
		out[i] = conditions.Condition{Type: c.Type, Status: conditions.Status(c.Status), Reason: deref(c.Reason), Message: deref(c.Message),
			ObservedGeneration: deref(c.ObservedGeneration), LastTransitionTime: deref(c.LastTransitionTime), LastUpdatedTime: deref(c.LastUpdatedTime)}
	}
	return out
}

// parseRef reads a resource's ids as the generic client takes them.
func parseRef(kind *Kind, parentID, id string) (api.ResourceRef, error) {
	var r api.ResourceRef
	var err error
	if r.ID, err = uuid.Parse(id); err != nil {
		return r, fmt.Errorf("%s id %q: %w", kind.Name, id, ErrNotFound)
	}
	if kind.Parent != nil {
		if r.Parent, err = uuid.Parse(parentID); err != nil {
			return r, fmt.Errorf("%s parent id %q: %w", kind.Name, parentID, ErrNotFound)
		}
	}
	return r, nil
}

// sendFailed is the error of a request that got no answer.
func sendFailed(ctx context.Context, err error) error {
	return fmt.Errorf("hyperfleet-api %s: %w", opOf(ctx), err)
}

// check returns the error of a request that got no answer, an *APIError for an answer other than a success, and
// an error for a success without the document expected.
func check[T any](ctx context.Context, answer *api.Answer[T], err error) error {
	if err != nil {
		return sendFailed(ctx, err)
	}
	if answer.StatusCode() >= 300 {
		e := &APIError{Op: opOf(ctx), Status: answer.StatusCode()}
		if p := answer.Problem(); p != nil {
			e.Code, e.Detail = p.Code, deref(p.Detail)
		}
		return e
	}
	if answer.JSON200 == nil {
		return fmt.Errorf("hyperfleet-api %s: answered %d without a JSON document", opOf(ctx), answer.StatusCode())
	}
	return nil
}

type opKey struct{}

// withOp names the operation of the requests made with ctx, for the metrics and errors.
func withOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

func opOf(ctx context.Context) string {
	if op, ok := ctx.Value(opKey{}).(string); ok {
		return op
	}
	return "other"
}

// apiTransport authenticates, names the shard of, counts and logs every request to the API.
type apiTransport struct {
	base    http.RoundTripper
	token   *tokenFile
	metrics *metrics
	shard   string // api.ShardHeader's value: the API rate-limits each adapter identity per shard
}

func (t *apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := opOf(req.Context())
	// A RoundTripper must not change the caller's request.
	req = req.Clone(req.Context())
	if req.Header.Get("Accept") == "" { // a watch asks for text/event-stream
		req.Header.Set("Accept", "application/json")
	}
	if t.shard != "" {
		req.Header.Set(api.ShardHeader, t.shard)
	}
	if t.token != nil {
		tok, err := t.token.Token()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.metrics.apiRequests.WithLabelValues(op, "error").Inc()
		return nil, err
	}
	t.metrics.apiRequests.WithLabelValues(op, strconv.Itoa(resp.StatusCode)).Inc()
	if resp.StatusCode == http.StatusUnauthorized && t.token != nil {
		t.token.invalidate() // a rotated token may be on disk already
	}
	return resp, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
