package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// maxAnswer bounds how much of one answer the CLI reads; a list page of 500 clusters is about 1 MB.
const maxAnswer = 64 << 20

// maxPageSize is the largest page the API serves; --all pages through with it.
const maxPageSize = 500

// client sends the CLI's requests through the generic client to one server.
type client struct {
	gen *api.Client
	// stream is gen without the request timeout, for watches, which last as long as the command.
	stream *api.Client
	server string
	// editor adds the CLI's headers (User-Agent, Authorization) to a request, also to the raw calls of `api`.
	editor api.RequestEditorFn
}

func newClient(server, token string, httpClient *http.Client) (*client, error) {
	editor := func(_ context.Context, req *http.Request) error {
		req.Header.Set("User-Agent", "hyperfleet-cli/"+command.Version())
		// Without a token there is no header at all: an API running without authentication needs none.
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}
	gen, err := api.NewClient(server, api.WithHTTPClient(httpClient), api.WithRequestEditorFn(editor))
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", server, err)
	}
	stream, err := api.NewClient(server, api.WithHTTPClient(&http.Client{Transport: httpClient.Transport}), api.WithRequestEditorFn(editor))
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", server, err)
	}
	return &client{gen: gen, stream: stream, server: server, editor: editor}, nil
}

// do reads an answer of the generated client: a 2xx answer's body is returned, any other becomes an *apiError.
func (c *client) do(resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, c.sendError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", c.server, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newAPIError(resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return body, nil
}

// sendError explains a request that got no answer. A cancelled context is returned as is, so that callers can
// tell an interrupt from a failure.
func (c *client) sendError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return &unreachableError{server: c.server, err: err}
}

// unreachableError is a request that got no answer from the server.
type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the HyperFleet API at %s: %v\n(is it running? --server or HYPERFLEET_SERVER names another)", e.server, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// apiError is an error answer of the API, with its problem+json document when it sent one.
type apiError struct {
	status  int
	problem api.Problem // Code is empty when the answer was not a problem document
	text    string      // the start of an answer that was not a problem document
}

func newAPIError(status int, contentType string, body []byte) *apiError {
	e := &apiError{status: status}
	if strings.HasPrefix(contentType, "application/problem+json") && json.Unmarshal(body, &e.problem) == nil && e.problem.Code != "" {
		return e
	}
	e.problem = api.Problem{}
	e.text = strings.TrimSpace(string(body[:min(len(body), 200)]))
	return e
}

// Error is the problem on one line: "HYPERFLEET-NTF-001 (404 Not Found): no cluster with id …".
func (e *apiError) Error() string {
	head := fmt.Sprintf("%d %s", e.status, http.StatusText(e.status))
	if e.problem.Code == "" {
		if e.text == "" {
			return "the API answered " + head
		}
		return fmt.Sprintf("the API answered %s: %s", head, e.text)
	}
	detail := e.problem.Title
	if e.problem.Detail != nil && *e.problem.Detail != "" {
		detail = *e.problem.Detail
	}
	return fmt.Sprintf("%s (%s): %s", e.problem.Code, head, detail)
}

// details are the lines that follow Error when the error is shown to a person: field errors, the request id of a
// server failure (what an operator needs to find it in the log), and what to do about a missing token.
func (e *apiError) details() []string {
	var out []string
	if e.problem.Errors != nil {
		for _, f := range *e.problem.Errors {
			out = append(out, fmt.Sprintf("%s: %s", f.Field, f.Message))
		}
	}
	if e.status >= http.StatusInternalServerError && e.problem.RequestId != nil {
		out = append(out, "request id: "+*e.problem.RequestId)
	}
	switch e.status {
	case http.StatusUnauthorized:
		out = append(out, "log in with `hyperfleet login`, or pass --token or HYPERFLEET_TOKEN")
	case http.StatusForbidden:
		out = append(out, "the token's role does not allow this")
	}
	return out
}

// notFound reports whether err is the API's 404.
func notFound(err error) bool {
	var aerr *apiError
	return errors.As(err, &aerr) && aerr.status == http.StatusNotFound
}

// page is one page of a list, its items as the API wrote them.
type page struct {
	Kind  string            `json:"kind"`
	Page  int               `json:"page"`
	Size  int               `json:"size"`
	Total int64             `json:"total"`
	Next  string            `json:"next,omitempty"`
	Items []json.RawMessage `json:"items"`
	// ResourceVersion is the change feed position the page reflects: a watch starts after it.
	ResourceVersion string `json:"resource_version,omitempty"`
}

// list fetches one page of kind k (under parent for a child kind; every parent's with uuid.Nil).
func (c *client) list(ctx context.Context, k *api.Kind, parent uuid.UUID, p api.ListParams) (*page, error) {
	body, err := c.do(c.gen.ListResources(ctx, k, parent, &p))
	if err != nil {
		return nil, err
	}
	var pg page
	if err := json.Unmarshal(body, &pg); err != nil {
		return nil, fmt.Errorf("decode a page of %s: %w", k.Plural, err)
	}
	return &pg, nil
}

// listAll pages through everything p selects, maxPageSize at a time unless p says otherwise. It follows the
// pages' `next` cursors rather than page numbers, so that resources created or deleted during the walk neither
// repeat an item nor skip one.
func (c *client) listAll(ctx context.Context, k *api.Kind, parent uuid.UUID, p api.ListParams) (*page, error) {
	if p.Size == nil {
		p.Size = ptr(maxPageSize)
	}
	p.Page = nil
	all := &page{Page: 1}
	for first := true; ; first = false {
		if !first {
			p.Count = ptr(false)
		}
		pg, err := c.list(ctx, k, parent, p)
		if err != nil {
			return nil, err
		}
		if first {
			all.Kind, all.Total, all.ResourceVersion = pg.Kind, pg.Total, pg.ResourceVersion
		}
		all.Items = append(all.Items, pg.Items...)
		if pg.Next == "" || len(pg.Items) == 0 {
			break
		}
		p.After = ptr(pg.Next)
	}
	all.Size = len(all.Items)
	if int64(all.Size) > all.Total {
		all.Total = int64(all.Size)
	}
	return all, nil
}

// object fetches one resource.
func (c *client) object(ctx context.Context, k *api.Kind, r api.ResourceRef) (*object, error) {
	body, err := c.do(c.gen.GetResource(ctx, k, r))
	if err != nil {
		return nil, err
	}
	return decodeObject(body)
}

// send runs a call that carries a JSON body and returns the resource the API answers with.
func (c *client) send(call func(body io.Reader) (*http.Response, error), body any) (*object, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	answer, err := c.do(call(bytes.NewReader(raw)))
	if err != nil {
		return nil, err
	}
	return decodeObject(answer)
}

// object is one resource of any kind: the API's JSON, and the members every kind has.
type object struct {
	raw json.RawMessage
	api.SparseResource
}

func decodeObject(raw []byte) (*object, error) {
	o := &object{raw: raw}
	if err := json.Unmarshal(raw, &o.SparseResource); err != nil {
		return nil, fmt.Errorf("decode a resource: %w", err)
	}
	return o, nil
}

func (o *object) name() string { return deref(o.Name) }

func (o *object) generation() int64 { return deref(o.Generation) }

func (o *object) phase() string {
	if o.Status == nil {
		return ""
	}
	return string(o.Status.Phase)
}

func (o *object) conditions() []api.Condition {
	if o.Status == nil {
		return nil
	}
	return o.Status.Conditions
}

func (o *object) deleting() bool { return o.DeletedTime != nil }

// ref returns the ids the generic client needs to address o.
func (o *object) ref() api.ResourceRef {
	r := api.ResourceRef{ID: o.Id}
	if o.OwnerReferences != nil {
		r.Parent = o.OwnerReferences.Id
	}
	return r
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
