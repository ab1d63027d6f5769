package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/jsonb"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// kindHandler serves the routes of one kind; every kind gets one, built from its descriptor.
type kindHandler struct {
	s *Handler
	d *resource.Descriptor
}

const (
	defaultPageSize = 20
	maxPageSize     = 500
)

// resourceJSON is the wire form of every kind (the openapi ResourceMeta plus spec and owner_references).
type resourceJSON struct {
	ID              string          `json:"id"`
	Kind            string          `json:"kind"`
	Name            string          `json:"name"`
	Href            string          `json:"href"`
	Labels          json.RawMessage `json:"labels"`
	Spec            json.RawMessage `json:"spec"`
	Generation      int64           `json:"generation"`
	ResourceVersion string          `json:"resource_version"`
	OwnerReferences *ownerJSON      `json:"owner_references,omitempty"`
	Status          statusJSON      `json:"status"`
	CreatedTime     time.Time       `json:"created_time"`
	UpdatedTime     time.Time       `json:"updated_time"`
	CreatedBy       string          `json:"created_by"`
	UpdatedBy       string          `json:"updated_by"`
	DeletedTime     *time.Time      `json:"deleted_time,omitempty"`
	DeletedBy       string          `json:"deleted_by,omitempty"`
	Tenant          string          `json:"tenant"`
	// DeletionProtection is the resource's delete guard.
	DeletionProtection bool `json:"deletion_protection"`
	// AdapterStatuses is set in a list asked with statuses= only (then `[]` when no adapter has reported).
	AdapterStatuses json.RawMessage `json:"adapter_statuses,omitempty"`
}

type ownerJSON struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Href string `json:"href"`
}

type statusJSON struct {
	Phase      conditions.Phase `json:"phase"`
	Conditions json.RawMessage  `json:"conditions"`
}

type listJSON struct {
	Kind  string `json:"kind"`
	Page  int    `json:"page"`
	Size  int    `json:"size"`
	Total int64  `json:"total"`
	Items []any  `json:"items"`
}

// listHead is the list envelope's members that are known before the items: listWriter writes them first and
// total last, so that a page goes to the client item by item as the database hands the rows over.
type listHead struct {
	Kind            string `json:"kind"`
	Page            int    `json:"page"`
	Size            int    `json:"size"`
	ResourceVersion string `json:"resource_version"`
}

// errWrite marks a failure to write to the client (it went away), as opposed to one to produce the answer.
var errWrite = errors.New("write the answer")

// listWriter writes a list envelope one item at a time through a small buffer, so that the memory of a list
// request does not grow with its page size. It writes nothing until the first item or finish, so that an error
// before any item can still be answered as a problem.
type listWriter struct {
	w           http.ResponseWriter
	contentType string
	head        listHead
	buf         *bufio.Writer
	started     bool
}

// listBuffer is how much of a page is gathered before it goes out.
const listBuffer = 32 << 10

func (l *listWriter) start() error {
	l.started = true
	l.w.Header().Set("Content-Type", l.contentType)
	l.w.WriteHeader(http.StatusOK)
	l.buf = bufio.NewWriterSize(l.w, listBuffer)
	head, err := json.Marshal(l.head)
	if err != nil {
		return err
	}
	// {"kind":…,"page":…,"size":…,"items":[
	if _, err := l.buf.Write(append(head[:len(head)-1], `,"items":[`...)); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

func (l *listWriter) item(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return l.rawItem(raw)
}

// rawItem writes an item already encoded.
func (l *listWriter) rawItem(raw []byte) error {
	first := !l.started
	if first {
		if err := l.start(); err != nil {
			return err
		}
	}
	if !first {
		if err := l.buf.WriteByte(','); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
	}
	if _, err := l.buf.Write(raw); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// finish closes the items and writes the next page's cursor and the total, when there are.
func (l *listWriter) finish(res resource.ListResult) error {
	if !l.started {
		if err := l.start(); err != nil {
			return err
		}
	}
	tail := `]`
	if res.Next != "" {
		tail += `,"next":"` + res.Next + `"` // base64url: nothing to escape
	}
	if res.Counted {
		tail += `,"total":` + strconv.FormatInt(res.Total, 10)
		if res.Estimated {
			tail += `,"total_estimated":true`
		}
	}
	if _, err := l.buf.WriteString(tail + "}\n"); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if err := l.buf.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// present returns the wire form of r, without its internal spec fields when public. A list hands over the stored
// conditions as they are; a write's typed conditions are encoded here.
func (k *kindHandler) present(r *resource.Resource, public bool) (resourceJSON, error) {
	spec := r.Spec
	if public && k.d.Spec.HasInternal() {
		var err error
		if spec, err = k.publicSpec(r); err != nil {
			return resourceJSON{}, err
		}
	}
	labels, err := rawLabels(r)
	if err != nil {
		return resourceJSON{}, err
	}
	out := resourceJSON{
		ID: r.ID, Kind: r.Kind, Name: r.Name, Href: BasePath + k.d.Path(r.ParentID, r.ID), Labels: labels,
		Spec: spec, Generation: r.Generation, ResourceVersion: strconv.FormatInt(r.Version, 10), Status: statusJSON{Phase: r.Status.Phase, Conditions: r.Status.RawConditions},
		CreatedTime: r.CreatedTime, UpdatedTime: r.UpdatedTime, CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy,
		DeletedTime: r.DeletedTime, DeletedBy: r.DeletedBy, Tenant: r.Tenant, DeletionProtection: r.DeletionProtection,
	}
	if out.Status.Conditions == nil {
		conds := r.Status.Conditions
		if conds == nil {
			conds = []conditions.Condition{}
		}
		raw, err := json.Marshal(conds)
		if err != nil {
			return out, fmt.Errorf("encode the conditions of %s %s: %w", r.Kind, r.ID, err)
		}
		out.Status.Conditions = raw
	}
	if k.d.Parent != nil {
		out.OwnerReferences = &ownerJSON{ID: r.ParentID, Kind: k.d.Parent.Kind, Href: BasePath + k.d.Parent.Path("", r.ParentID)}
	}
	if r.AdapterStatuses != nil {
		if out.AdapterStatuses, err = encodeStatuses(r); err != nil {
			return out, err
		}
	}
	return out, nil
}

// encodeStatuses returns r's AdapterStatuses as a list item carries them: as GET …/statuses shows each.
func encodeStatuses(r *resource.Resource) (json.RawMessage, error) {
	out := make([]statusJSONOut, len(r.AdapterStatuses))
	for i := range r.AdapterStatuses {
		out[i] = presentStatus(&r.AdapterStatuses[i])
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the reports on %s %s: %w", r.Kind, r.ID, err)
	}
	return raw, nil
}

// publicSpec returns r's spec without its internal fields, which only admins and adapters see: the public
// document that viewers and users are served does not have them either.
func (k *kindHandler) publicSpec(r *resource.Resource) (json.RawMessage, error) {
	var spec map[string]any
	if err := json.Unmarshal(r.Spec, &spec); err != nil {
		return nil, fmt.Errorf("decode the spec of %s %s: %w", r.Kind, r.ID, err)
	}
	if !k.d.Spec.StripInternal(spec) {
		return r.Spec, nil
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode the public spec of %s %s: %w", r.Kind, r.ID, err)
	}
	return raw, nil
}

// seesInternal reports whether the caller may see internal spec fields: admins and adapters (which act on them)
// may; with authorization off every caller is an admin.
func (s *Handler) seesInternal(r *http.Request) bool {
	if !s.cfg.Authorize {
		return true
	}
	id, _ := r.Context().Value(callerIdentityKey{}).(auth.Identity)
	return id.HasRole(auth.RoleAdmin) || id.HasRole(auth.RoleAdapter)
}

func (k *kindHandler) writeResource(w http.ResponseWriter, r *http.Request, status int, res *resource.Resource) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(res.Version, 10)))
	public := !k.s.seesInternal(r)
	if !public || !k.d.Spec.HasInternal() {
		// Nothing to hide: written as a list item is, without encoding/json (the same bytes).
		buf, err := k.appendResource(make([]byte, 0, 4096), res)
		if err != nil {
			k.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		// As json.Encoder ends a value. The bytes are JSON served as application/json, not markup.
		_, err = w.Write(append(buf, '\n')) //nolint:gosec // G705: see above
		logEncodeError(r, k.s.log, err)
		return
	}
	out, err := k.present(res, public)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	k.s.respond(w, r, status, out)
}

func (k *kindHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, k.s.log, err)
}

func (k *kindHandler) list(w http.ResponseWriter, r *http.Request) {
	opts, fields, err := listOptions(r)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	opts.ParentID = idsOf(r).parent
	// A filter on a field the answer would hide is an oracle for it, on a list and on a watch alike.
	opts.SearchPublic = !k.s.seesInternal(r)
	if err := k.mayAskPending(r, opts.PendingFor); err != nil {
		k.fail(w, r, err)
		return
	}
	if watch, err := watchRequested(r); err != nil || watch {
		if err != nil {
			k.fail(w, r, err)
			return
		}
		if opts.Statuses != nil {
			// A watch event carries the resource, not reports: a watcher lists with statuses= and reads
			// …/statuses for the resources whose events it receives.
			k.fail(w, r, badParam("statuses", "does not go with watch=true: list with it, then watch without it"))
			return
		}
		k.watch(w, r, opts, fields)
		return
	}
	// Lists can be expensive (a search with like '%x%', a deep page): one identity runs a few at a time, so that
	// it cannot take every database connection.
	release, ok, _ := k.s.lists.acquire(resource.CallerFrom(r.Context()).Name)
	if !ok {
		k.s.tooMany(w, r, "lists", true, listRetryAfter)
		return
	}
	defer release()
	// The position is taken before the page is read: every change up to it is in the page, and watching from
	// it misses none after.
	position := k.s.feedHead()
	contentType := "application/json"
	if fields != nil {
		// A sparse page is its own media type: its items lack members a full resource must have.
		contentType = sparseJSON
	}
	if fields != nil && !fields["labels"] && !fields["spec"] && !fields["status"] {
		// A sparse page without the JSON members need not read them: they are most of what a row costs PostgreSQL
		// to send (adapters list with fields=id,owner_references).
		opts.KeysOnly = true
	}
	public := !k.s.seesInternal(r)
	fast := k.fastItems(&opts, fields, public)
	opts.Borrow = fast // appendResource copies what it writes before the next row is read
	out := &listWriter{w: w, contentType: contentType, head: listHead{Kind: k.d.Kind + "List", Page: opts.Page, Size: opts.Size,
		ResourceVersion: formatPosition(position)}}
	var buf []byte
	result, err := k.s.svc.List(r.Context(), k.d, opts, func(res *resource.Resource) error {
		if fast {
			var err error
			if buf, err = k.appendResource(buf[:0], res); err != nil {
				return err
			}
			return out.rawItem(buf)
		}
		item, err := k.present(res, public)
		if err != nil {
			return err
		}
		if fields == nil {
			return out.item(item)
		}
		sparse, err := project(item, fields)
		if err != nil {
			return err
		}
		return out.item(sparse)
	})
	switch {
	case err == nil:
		logEncodeError(r, k.s.log, out.finish(result))
	case !out.started:
		k.fail(w, r, err)
	case r.Context().Err() != nil || errors.Is(err, errWrite):
		k.s.log.DebugContext(r.Context(), "the client went away during a list", "error", err, "request_id", requestID(r.Context()))
	default:
		// The status and part of the page are sent: cutting the connection is how the client learns the page is
		// not whole, rather than mistaking a truncated one for complete.
		k.s.log.ErrorContext(r.Context(), "list failed after it began", "error", err, "request_id", requestID(r.Context()))
		panic(http.ErrAbortHandler)
	}
}

// mayAskPending refuses pending_for for an adapter the kind does not require unless the caller is that adapter or
// an admin: for such an adapter the filter is an anti-join over the kind's table, which others have no need to run.
func (k *kindHandler) mayAskPending(r *http.Request, adapter string) error {
	if adapter == "" || !k.s.cfg.Authorize || slices.Contains(k.d.RequiredAdapters, adapter) {
		return nil
	}
	id, _ := r.Context().Value(callerIdentityKey{}).(auth.Identity)
	if id.HasRole(auth.RoleAdmin) || (id.HasRole(auth.RoleAdapter) && id.Adapter == adapter) {
		return nil
	}
	return &resource.Error{Code: resource.CodeForbidden,
		Message: fmt.Sprintf("pending_for=%s: %s does not require that adapter; only the adapter itself or an admin may ask what it has pending", adapter, k.d.Kind),
		Fields:  []resource.FieldError{{Field: "pending_for", Message: "not a required adapter of " + k.d.Kind}}}
}

// sparseJSON is the media type of a list whose items carry only the members `fields` asked for.
const sparseJSON = "application/vnd.hyperfleet.sparse+json"

// knownFields are the top-level members a `fields` list may name.
var knownFields = map[string]bool{
	"id": true, "kind": true, "name": true, "href": true, "labels": true, "spec": true, "generation": true,
	"resource_version": true, "owner_references": true, "status": true, "created_time": true, "updated_time": true, "created_by": true,
	"updated_by": true, "deleted_time": true, "deleted_by": true, "tenant": true, "deletion_protection": true,
}

func project(item resourceJSON, fields map[string]bool) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(item)
	if err != nil {
		return nil, fmt.Errorf("encode item: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("decode item: %w", err)
	}
	for f := range all {
		// adapter_statuses is there only when statuses= asked for it, which is asking for it whatever fields says.
		if !fields[f] && f != "adapter_statuses" {
			delete(all, f)
		}
	}
	return all, nil
}

func badParam(name, msg string) error {
	return &resource.Error{Code: resource.CodeBadListParam, Message: fmt.Sprintf("query parameter %s %s", name, msg),
		Fields: []resource.FieldError{{Field: name, Message: msg}}}
}

func listOptions(r *http.Request) (resource.ListOptions, map[string]bool, error) {
	q := r.URL.Query()
	opts := resource.ListOptions{Page: 1, Size: defaultPageSize, Search: q.Get("search")}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return opts, nil, badParam("page", "must be a whole number from 1")
		}
		opts.Page = n
	}
	if v := q.Get("after"); v != "" {
		if len(v) > 2048 {
			return opts, nil, badParam("after", "is not a cursor this API gave out")
		}
		opts.After = v
	}
	switch q.Get("count") {
	case "", "true":
	case "false":
		opts.NoCount = true
	default:
		return opts, nil, badParam("count", "must be true or false")
	}
	switch q.Get("count_estimate") {
	case "", "false":
	case "true":
		opts.EstimateCount = true
	default:
		return opts, nil, badParam("count_estimate", "must be true or false")
	}
	if v := q.Get("size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return opts, nil, badParam("size", fmt.Sprintf("must be a whole number from 1 to %d", maxPageSize))
		}
		opts.Size = n
	}
	if v := q.Get("include_deleted"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return opts, nil, badParam("include_deleted", "must be true or false")
		}
		opts.IncludeDeleted = b
	}
	if v := strings.TrimSpace(q.Get("order")); v != "" {
		for _, part := range strings.Split(v, ",") {
			words := strings.Fields(part)
			if len(words) == 0 || len(words) > 2 {
				return opts, nil, badParam("order", "must be a comma-separated list of `<field> [asc|desc]`")
			}
			o := resource.OrderBy{Field: words[0]}
			if len(words) == 2 {
				switch strings.ToLower(words[1]) {
				case "asc":
				case "desc":
					o.Desc = true
				default:
					return opts, nil, badParam("order", fmt.Sprintf("direction %q must be asc or desc", words[1]))
				}
			}
			opts.Order = append(opts.Order, o)
		}
	}
	opts.PendingFor = q.Get("pending_for")
	if v := q.Get("resync_after"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return opts, nil, badParam("resync_after", "must be a positive duration such as 5m or 30s")
		}
		opts.ResyncAfter = d
	}
	if q.Has("statuses") {
		opts.Statuses = []string{}
		for _, a := range strings.Split(q.Get("statuses"), ",") {
			if a = strings.TrimSpace(a); a != "" && !slices.Contains(opts.Statuses, a) {
				opts.Statuses = append(opts.Statuses, a)
			}
		}
		if len(opts.Statuses) == 0 {
			return opts, nil, badParam("statuses", "must name at least one adapter")
		}
	}
	var fields map[string]bool
	if v := strings.TrimSpace(q.Get("fields")); v != "" {
		fields = map[string]bool{"id": true, "kind": true, "href": true}
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !knownFields[f] {
				return opts, nil, badParam("fields", fmt.Sprintf("names unknown field %q", f))
			}
			fields[f] = true
		}
	}
	return opts, fields, nil
}

// decodeStrict reads a JSON object into v, refusing unknown members, trailing data and oversized bodies.
func decodeStrict(r *http.Request, v any) error {
	if err := checkMediaType(r); err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeStrictBytes(body, v)
}

func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyReadError(r, err)
	}
	return body, nil
}

// decodeStrictBytes is decodeStrict on a body already read.
func decodeStrictBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return malformed(err)
	}
	if dec.More() {
		return &resource.Error{Code: resource.CodeMalformed, Message: "the body must be a single JSON object"}
	}
	// Valid JSON that PostgreSQL's jsonb would refuse is bad input, decided here before anything is stored; so is
	// a member sent twice, of which only one value would be kept.
	if p := jsonb.Check(body); p != nil {
		field := p.Path
		if field == "" {
			field = "(body)"
		}
		if p.Duplicate {
			return &resource.Error{Code: resource.CodeMalformed, Message: "a member is repeated: " + p.Error(),
				Fields: []resource.FieldError{{Field: field, Message: p.Reason}}}
		}
		return &resource.Error{Code: resource.CodeUnstorable, Message: "a value cannot be stored: " + p.Error(),
			Fields: []resource.FieldError{{Field: field, Message: p.Reason}}}
	}
	return exactMembers(body, reflect.TypeOf(v), "")
}

// checkMediaType refuses a body in a media type the operation does not take (415), before reading it: a PATCH
// takes a JSON merge patch (application/merge-patch+json, or application/json), everything else JSON. Media types
// are case-insensitive (RFC 9110), a charset other than UTF-8 is refused, and a missing Content-Type is taken as
// JSON.
func checkMediaType(r *http.Request) error {
	header := r.Header.Get("Content-Type")
	if header == "" {
		return nil
	}
	want := []string{"application/json"}
	if r.Method == http.MethodPatch {
		want = []string{"application/merge-patch+json", "application/json"}
	}
	mediaType, params, err := mime.ParseMediaType(header)
	if err == nil && slices.Contains(want, mediaType) {
		if charset, ok := params["charset"]; !ok || strings.EqualFold(charset, "utf-8") {
			return nil
		}
	}
	return &resource.Error{Code: resource.CodeUnsupportedMediaType,
		Message: fmt.Sprintf("Content-Type %q is not accepted here: send %s", header, strings.Join(want, " or ")),
		Fields:  []resource.FieldError{{Field: "Content-Type", Message: "must be " + strings.Join(want, " or ")}}}
}

// bodyReadError classifies a failure to read a request body. Reading from a socket the server accepted fails only
// because of what the client sent or did, so none of these is a server error: a body over the limit (413), one
// that did not arrive within the read timeout (408), a client that hung up mid-body (499), or framing that is not
// HTTP (a broken chunked encoding: 400).
func bodyReadError(r *http.Request, err error) error {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(tooBig.Limit)
	case errors.As(err, &netErr) && netErr.Timeout():
		return &resource.Error{Code: resource.CodeRequestTimeout, Message: "the request body did not arrive within the server's read timeout"}
	case r.Context().Err() != nil, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return &resource.Error{Code: resource.CodeClientClosed, Message: "the client closed the connection before the body ended"}
	default:
		return &resource.Error{Code: resource.CodeMalformed, Message: "the request body cannot be read: " + err.Error()}
	}
}

func malformed(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		return &resource.Error{Code: resource.CodeMalformed, Message: fmt.Sprintf("%s must be %s, not %s", field, typeErr.Type, typeErr.Value),
			Fields: []resource.FieldError{{Field: field, Message: fmt.Sprintf("must be %s", typeErr.Type)}}}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return &resource.Error{Code: resource.CodeMalformed, Message: fmt.Sprintf("unknown field %q", name),
			Fields: []resource.FieldError{{Field: name, Message: "is not a field of this request"}}}
	}
	if errors.Is(err, io.EOF) {
		return &resource.Error{Code: resource.CodeMalformed, Message: "the body is empty: a JSON object is required"}
	}
	return &resource.Error{Code: resource.CodeMalformed, Message: "the body is not valid JSON: " + err.Error()}
}

type createBody struct {
	Name               string            `json:"name"`
	Labels             map[string]string `json:"labels"`
	Spec               json.RawMessage   `json:"spec"`
	DeletionProtection bool              `json:"deletion_protection"`
}

func (k *kindHandler) create(w http.ResponseWriter, r *http.Request) {
	dryRun, err := boolParam(r, "dry_run")
	if err != nil {
		k.fail(w, r, err)
		return
	}
	var body createBody
	if err := decodeStrict(r, &body); err != nil {
		k.fail(w, r, err)
		return
	}
	parentID := idsOf(r).parent
	res, err := k.s.svc.Create(r.Context(), k.d, parentID, resource.CreateInput{Name: body.Name, Labels: body.Labels, Spec: body.Spec,
		DeletionProtection: body.DeletionProtection, DryRun: dryRun})
	if err != nil {
		k.fail(w, r, err)
		return
	}
	if dryRun {
		k.writeResource(w, r, http.StatusOK, res)
		return
	}
	w.Header().Set("Location", BasePath+k.d.Path(parentID, res.ID))
	k.writeResource(w, r, http.StatusCreated, res)
}

func (k *kindHandler) get(w http.ResponseWriter, r *http.Request) {
	ids := idsOf(r)
	res, err := k.s.svc.Get(r.Context(), k.d, ids.parent, ids.id)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	k.writeResource(w, r, http.StatusOK, res)
}

type patchBody struct {
	Labels             json.RawMessage `json:"labels"`
	Spec               json.RawMessage `json:"spec"`
	DeletionProtection *bool           `json:"deletion_protection"`
}

func (k *kindHandler) patch(w http.ResponseWriter, r *http.Request) {
	ifMatch, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		k.fail(w, r, err)
		return
	}
	force, err := k.s.forced(r)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	var body patchBody
	if err := decodeStrict(r, &body); err != nil {
		k.fail(w, r, err)
		return
	}
	ids := idsOf(r)
	res, err := k.s.svc.Update(r.Context(), k.d, ids.parent, ids.id, resource.Patch{Labels: body.Labels, Spec: body.Spec, Force: force,
		DeletionProtection: body.DeletionProtection}, ifMatch)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	k.writeResource(w, r, http.StatusOK, res)
}

// boolParam reads an optional boolean query parameter (absent is false).
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badParam(name, "must be true or false")
	}
	return b, nil
}

// parseIfMatch accepts `"<resource_version>"` (the ETag we send) or a bare number.
func parseIfMatch(h string) (*int64, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(strings.Trim(h, `"`), 10, 64)
	if err != nil || n < 1 {
		return nil, &resource.Error{Code: resource.CodeMalformed, Message: `If-Match must be the resource's ETag (its resource_version in quotes), e.g. "3"`,
			Fields: []resource.FieldError{{Field: "If-Match", Message: "must be an ETag this API sent"}}}
	}
	return &n, nil
}

func (k *kindHandler) remove(w http.ResponseWriter, r *http.Request) {
	ids := idsOf(r)
	res, err := k.s.svc.Delete(r.Context(), k.d, ids.parent, ids.id)
	if err != nil {
		k.fail(w, r, err)
		return
	}
	k.writeResource(w, r, http.StatusAccepted, res)
}
