package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hyperfleet/hyperfleet/openapi"
)

// apiBasePath is where the document's paths live; answers to other paths (the document itself, the UI, health and
// metrics listeners) are not described by it and pass unchecked.
const apiBasePath = "/api/hyperfleet/v1"

// Contract checks answers against openapi/openapi.yaml: its RoundTripper fails the test (tb.Errorf) whose request
// got an answer the document does not allow (an undeclared status, a body that breaks its schema, a wrong content
// type, a request to a path or method the document does not have).
type Contract struct {
	router  routers.Router
	problem *openapi3.Schema
}

// NewContract loads the embedded OpenAPI document (internal fields included: tests talk as admins and adapters,
// who see them).
func NewContract(tb testing.TB) *Contract {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document())
	if err != nil {
		tb.Fatalf("harness: loading openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		tb.Fatalf("harness: openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	// The document names localhost:8000; tests serve on other ports. Without servers the router matches any host.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		tb.Fatalf("harness: routing openapi.yaml: %v", err)
	}
	problem := doc.Components.Schemas["Problem"]
	if problem == nil || problem.Value == nil {
		tb.Fatalf("harness: openapi.yaml has no Problem schema")
	}
	return &Contract{router: router, problem: problem.Value}
}

// Transport wraps base (nil: http.DefaultTransport) so that every answer it carries is checked against the
// document, failing tb on a violation. The answer itself is passed on unchanged.
func (c *Contract) Transport(tb testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &contractTransport{contract: c, tb: tb, base: base}
}

// Check returns why an answer breaks the document, or nil. body is the answer's whole body.
func (c *Contract) Check(ctx context.Context, req *http.Request, status int, header http.Header, body []byte) error {
	return c.check(ctx, req, status, header, body, true)
}

// check is Check; withBody false checks the status and headers only (a watch's body never ends).
func (c *Contract) check(ctx context.Context, req *http.Request, status int, header http.Header, body []byte, withBody bool) error {
	if !strings.HasPrefix(req.URL.Path, apiBasePath) {
		return nil
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		// A path or method the document does not have can only be answered as a route that does not exist.
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return fmt.Errorf("no operation in openapi.yaml for %s %s, yet it answered %d: %w", req.Method, req.URL.Path, status, err)
		}
		return c.checkProblem(header, body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status,
		Header: header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true, // a status the operation does not declare (and no default) is a violation
			MultiError:            true,
			ExcludeResponseBody:   !withBody,
		},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		return fmt.Errorf("%s %s answered %d, which openapi.yaml does not allow: %w", req.Method, req.URL.Path, status, err)
	}
	return nil
}

// checkProblem checks an answer that must be a problem document.
func (c *Contract) checkProblem(header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("an error answer has content type %q, not application/problem+json", ct)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("an error answer is not JSON: %w", err)
	}
	if err := c.problem.VisitJSON(doc, openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("an error answer does not match the Problem schema: %w", err)
	}
	return nil
}

type contractTransport struct {
	contract *Contract
	tb       testing.TB
	base     http.RoundTripper
}

func (t *contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, apiBasePath) {
		return resp, err
	}
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A watch: the stream never ends, so only what precedes the body is checked; its events are checked by
		// the watch tests against the WatchEvent schema.
		if err := t.contract.check(context.WithoutCancel(req.Context()), req, resp.StatusCode, resp.Header, nil, false); err != nil {
			t.tb.Errorf("contract violation: %v", err)
		}
		return resp, nil
	}
	body, readErr := io.ReadAll(resp.Body)
	if err := resp.Body.Close(); err != nil && readErr == nil {
		readErr = err
	}
	if readErr != nil {
		// The caller would have failed to read it too: it gets what was read, then the same failure.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{readErr}))
		return resp, nil //nolint:nilerr // the failure surfaces where the caller reads the body, as it would have
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	// Validation must not depend on the caller's context, which may end as soon as the answer is read.
	if err := t.contract.Check(context.WithoutCancel(req.Context()), req, resp.StatusCode, resp.Header, body); err != nil {
		t.tb.Errorf("contract violation: %v\nbody: %.2000s", err, body)
	}
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
