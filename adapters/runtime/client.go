package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Kind names the resources an adapter reconciles, as the API's paths do.
type Kind struct {
	Name   string // "VersionStream"
	Plural string // "versionstreams"
	Parent *Kind  // a child kind's parent (NodePool → Cluster); nil for a root kind
}

// path returns the API path of one resource below the base path.
func (k *Kind) path(key Key) string {
	if k.Parent == nil {
		return "/" + k.Plural + "/" + key.ID
	}
	return "/" + k.Parent.Plural + "/" + key.ParentID + "/" + k.Plural + "/" + key.ID
}

// Key identifies one resource in the work queue.
type Key struct {
	ID       string
	ParentID string // set for child kinds
}

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

// statusStale is the problem code of a report older than the stored one.
const statusStale = "HYPERFLEET-STS-001"

func isStatus(err error, status int) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == status
}

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

// apiClient speaks to hyperfleet-api for any kind. The runtime is generic over kinds, so it decodes the
// envelope every resource shares itself and uses the generated types for reports.
type apiClient struct {
	base    string // …/api/hyperfleet/v1
	hc      *http.Client
	token   *tokenFile // nil: no authentication
	metrics *metrics
}

// wireResource is the part of every kind's JSON the runtime needs.
type wireResource struct {
	ID              string            `json:"id"`
	Kind            string            `json:"kind"`
	Name            string            `json:"name"`
	Generation      int64             `json:"generation"`
	Labels          map[string]string `json:"labels"`
	Spec            json.RawMessage   `json:"spec"`
	DeletedTime     *time.Time        `json:"deleted_time"`
	OwnerReferences *struct {
		ID string `json:"id"`
	} `json:"owner_references"`
}

// key is the resource's queue key; a child's parent comes from its owner reference.
func (w *wireResource) key() Key {
	k := Key{ID: w.ID}
	if w.OwnerReferences != nil {
		k.ParentID = w.OwnerReferences.ID
	}
	return k
}

func (w *wireResource) object() *Object {
	return &Object{Kind: w.Kind, ID: w.ID, Name: w.Name, Generation: w.Generation, Labels: w.Labels, Spec: w.Spec, DeletedTime: w.DeletedTime}
}

// pendingItem is a resource a poll found, with the generation it found it at.
type pendingItem struct {
	Key
	Generation int64
}

// pending returns, in id order, up to size resources after afterID that the adapter must look at, deleting
// ones included, and whether more may follow.
func (c *apiClient) pending(ctx context.Context, kind *Kind, adapter string, resync time.Duration, afterID string, size int) ([]pendingItem, bool, error) {
	q := url.Values{
		"pending_for": {adapter}, "include_deleted": {"true"}, "fields": {"id,generation,owner_references"},
		"size": {strconv.Itoa(size)}, "order": {"id"},
	}
	if afterID != "" {
		q.Set("search", "id > '"+afterID+"'")
	}
	if resync > 0 {
		q.Set("resync_after", resync.String())
	}
	var list struct {
		Items []wireResource `json:"items"`
	}
	if err := c.do(ctx, "list pending", http.MethodGet, "/"+kind.Plural+"?"+q.Encode(), nil, &list); err != nil {
		return nil, false, err
	}
	items := make([]pendingItem, len(list.Items))
	for i, it := range list.Items {
		items[i] = pendingItem{Key: it.key(), Generation: it.Generation}
	}
	return items, len(list.Items) == size, nil
}

// get fetches one resource; an *APIError with status 404 when it is gone.
func (c *apiClient) get(ctx context.Context, kind *Kind, key Key) (*Object, error) {
	var w wireResource
	if err := c.do(ctx, "get", http.MethodGet, kind.path(key), nil, &w); err != nil {
		return nil, err
	}
	obj := w.object()
	if kind.Parent != nil {
		var p wireResource
		if err := c.do(ctx, "get parent", http.MethodGet, kind.Parent.path(Key{ID: key.ParentID}), nil, &p); err != nil {
			return nil, err
		}
		obj.Parent = p.object()
	}
	return obj, nil
}

// recent returns the keys of up to n resources of the kind, most recently updated first.
func (c *apiClient) recent(ctx context.Context, kind *Kind, n int) ([]Key, error) {
	q := url.Values{"size": {strconv.Itoa(n)}, "order": {"updated_time desc"}, "include_deleted": {"true"},
		"fields": {"id,owner_references"}}
	var list struct {
		Items []wireResource `json:"items"`
	}
	if err := c.do(ctx, "list recent", http.MethodGet, "/"+kind.Plural+"?"+q.Encode(), nil, &list); err != nil {
		return nil, err
	}
	keys := make([]Key, len(list.Items))
	for i := range list.Items {
		keys[i] = list.Items[i].key()
	}
	return keys, nil
}

// ownStatus returns the adapter's stored report about the resource, or nil if it has not reported.
func (c *apiClient) ownStatus(ctx context.Context, kind *Kind, key Key, adapter string) (*api.AdapterStatus, error) {
	var list api.AdapterStatusList
	if err := c.do(ctx, "list statuses", http.MethodGet, kind.path(key)+"/statuses", nil, &list); err != nil {
		return nil, err
	}
	for i, st := range list.Items {
		// Generation 0 is the API's placeholder for a required adapter that has not reported.
		if st.Adapter == adapter && st.ObservedGeneration > 0 {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// lastReport returns the adapter's stored report about the resource as the reconciler sees it, or nil.
func (c *apiClient) lastReport(ctx context.Context, kind *Kind, key Key, adapter string) (*Report, error) {
	st, err := c.ownStatus(ctx, kind, key, adapter)
	if st == nil || err != nil {
		return nil, err
	}
	r := &Report{ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Data: st.Data}
	for _, cond := range st.Conditions {
		r.Conditions = append(r.Conditions, Condition{Type: cond.Type, Status: ConditionStatus(cond.Status), Reason: deref(cond.Reason), Message: deref(cond.Message)})
	}
	return r, nil
}

// putStatus stores the adapter's report (PUT is idempotent, so a retry after a lost answer is harmless).
func (c *apiClient) putStatus(ctx context.Context, kind *Kind, key Key, report api.AdapterStatusReport) error {
	return c.do(ctx, "put status", http.MethodPut, kind.path(key)+"/statuses", report, nil)
}

// maxResponse caps what the runtime reads of one answer; a page of 500 ids is far below it.
const maxResponse = 8 << 20

func (c *apiClient) do(ctx context.Context, op, method, path string, body, into any) error {
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s: %w", op, err)
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reader)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != nil {
		tok, err := c.token.Token()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.metrics.apiRequests.WithLabelValues(op, "error").Inc()
		return fmt.Errorf("hyperfleet-api %s: %w", op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	c.metrics.apiRequests.WithLabelValues(op, strconv.Itoa(resp.StatusCode)).Inc()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("hyperfleet-api %s: read answer: %w", op, err)
	}
	if resp.StatusCode >= 300 {
		if resp.StatusCode == http.StatusUnauthorized && c.token != nil {
			c.token.invalidate() // a rotated token may be on disk already
		}
		e := &APIError{Op: op, Status: resp.StatusCode}
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(raw, &p) == nil {
			e.Code, e.Detail = p.Code, p.Detail
		}
		return e
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("hyperfleet-api %s: decode answer: %w", op, err)
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// tokenFile is a bearer token read from a file and read again when the file changes, as a projected Kubernetes
// service-account token is rotated in place. The file is looked at no more than once per recheck.
type tokenFile struct {
	path    string
	recheck time.Duration
	now     func() time.Time

	mu      sync.Mutex
	token   string
	modTime time.Time
	size    int64
	checked time.Time
}

func newTokenFile(path string) (*tokenFile, error) {
	t := &tokenFile{path: path, recheck: time.Second, now: time.Now}
	if _, err := t.Token(); err != nil {
		return nil, err
	}
	return t, nil
}

// Token returns the current token; an error when the file cannot be read or is empty.
func (t *tokenFile) Token() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && now.Sub(t.checked) < t.recheck {
		return t.token, nil
	}
	t.checked = now
	info, err := os.Stat(t.path)
	if err != nil {
		if t.token != "" {
			return t.token, nil // mid-rotation: keep the old token until the new file appears
		}
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	if t.token != "" && info.ModTime().Equal(t.modTime) && info.Size() == t.size {
		return t.token, nil
	}
	raw, err := os.ReadFile(t.path)
	if err != nil {
		if t.token != "" {
			return t.token, nil // swapped between Stat and ReadFile: the next look will find the new one
		}
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		if t.token != "" {
			return t.token, nil
		}
		return "", fmt.Errorf("bearer token file %s is empty", t.path)
	}
	t.token, t.modTime, t.size = tok, info.ModTime(), info.Size()
	return tok, nil
}

// invalidate makes the next Token read the file.
func (t *tokenFile) invalidate() {
	t.mu.Lock()
	t.checked, t.modTime = time.Time{}, time.Time{}
	t.mu.Unlock()
}
