package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"
)

// Store persists resources. Every method is one transaction that has committed when it returns.
type Store interface {
	// Create inserts r (ID, times and generation already set). It returns an *Error with CodeNotFound if the
	// parent does not exist, CodeParentDeleting if it is being deleted, CodeNameTaken if a live sibling has the name.
	Create(ctx context.Context, d *Descriptor, r *Resource) (*Resource, error)
	// Get returns the resource, or CodeNotFound (also when parentID is set and is not its parent).
	Get(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error)
	// List returns one page and the total count of matches.
	List(ctx context.Context, d *Descriptor, opts ListOptions) (*ResourcePage, error)
	// Update locks the row, calls mutate and writes the result if mutate reports a change.
	Update(ctx context.Context, d *Descriptor, parentID, id string, mutate func(r *Resource) (bool, error)) (*Resource, error)
	// MarkDeleted sets deleted time and caller, bumps the generation of the resource and of every
	// live descendant, and returns the resource. Marking a deleting resource again changes nothing.
	MarkDeleted(ctx context.Context, d *Descriptor, parentID, id, by string, now time.Time) (*Resource, error)
}

// Service applies the API's rules to any kind of resource.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns a Service over store.
func NewService(store Store) *Service {
	return &Service{store: store, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// CreateInput is what a client sends to create a resource.
type CreateInput struct {
	Name   string
	Labels map[string]string
	Spec   json.RawMessage
}

// Patch is an RFC 7386 merge patch of labels and/or spec; a nil member leaves that part alone.
type Patch struct {
	Labels json.RawMessage
	Spec   json.RawMessage
}

const (
	maxLabels        = 64
	maxLabelKeyLen   = 63
	maxLabelValueLen = 255
)

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelKey = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$`)
)

// Create validates in and stores a new resource of kind d under parentID (empty for a root kind).
func (s *Service) Create(ctx context.Context, d *Descriptor, parentID string, in CreateInput) (*Resource, error) {
	if d.Parent != nil && !validID(parentID) {
		return nil, notFound(d.Parent, parentID)
	}
	caller := CallerFrom(ctx)
	var problems []FieldError
	problems = append(problems, checkName(d, in.Name)...)
	problems = append(problems, checkLabels(in.Labels)...)
	spec, err := prepareSpec(d, caller, nil, in.Spec)
	if err != nil {
		return nil, err
	}
	problems = append(problems, specProblems(d, spec)...)
	if len(problems) > 0 {
		return nil, &Error{Code: CodeInvalid, Message: fmt.Sprintf("the %s is not valid", d.Kind), Fields: problems}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new id: %w", err)
	}
	now := s.now()
	labels := in.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	r := &Resource{
		ID: id.String(), Kind: d.Kind, Name: in.Name, ParentID: parentID, Labels: labels, Spec: raw,
		Generation: 1, Status: InitialStatus(d), CreatedTime: now, UpdatedTime: now,
		CreatedBy: caller.Name, UpdatedBy: caller.Name,
	}
	return s.store.Create(ctx, d, r)
}

// InitialStatus is the status of a resource no adapter has reported on yet.
func InitialStatus(d *Descriptor) Status {
	if len(d.RequiredAdapters) == 0 {
		return Status{Phase: PhaseReady, Conditions: []Condition{}}
	}
	return Status{Phase: PhasePending, Conditions: []Condition{}}
}

// Get returns one resource; parentID, when set, must be its parent.
func (s *Service) Get(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error) {
	if !validID(id) || (parentID != "" && !validID(parentID)) {
		return nil, notFound(d, id)
	}
	return s.store.Get(ctx, d, parentID, id)
}

// List returns a page of resources. A list under a parent that does not exist is CodeNotFound.
func (s *Service) List(ctx context.Context, d *Descriptor, opts ListOptions) (*ResourcePage, error) {
	if opts.ParentID != "" && !validID(opts.ParentID) {
		return nil, notFound(d.Parent, opts.ParentID)
	}
	page, err := s.store.List(ctx, d, opts)
	if err != nil {
		return nil, err
	}
	// Only an empty page can hide a missing parent, so only then pay for the look-up.
	if opts.ParentID != "" && page.Total == 0 {
		if _, err := s.store.Get(ctx, d.Parent, "", opts.ParentID); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// Update applies p to a resource. ifMatch, when not nil, is the generation the client expects (else
// CodeGenerationMismatch). The generation increments only when the spec changes semantically.
func (s *Service) Update(ctx context.Context, d *Descriptor, parentID, id string, p Patch, ifMatch *int64) (*Resource, error) {
	if !validID(id) || (parentID != "" && !validID(parentID)) {
		return nil, notFound(d, id)
	}
	if p.Labels == nil && p.Spec == nil {
		return nil, &Error{Code: CodeInvalid, Message: "the patch changes nothing: give spec and/or labels"}
	}
	caller := CallerFrom(ctx)
	return s.store.Update(ctx, d, parentID, id, func(r *Resource) (bool, error) {
		if ifMatch != nil && *ifMatch != r.Generation {
			return false, Errorf(CodeGenerationMismatch, "the %s is at generation %d, not %d", d.Kind, r.Generation, *ifMatch)
		}
		if r.Deleting() {
			return false, Errorf(CodeDeleting, "the %s is being deleted and can no longer change", d.Kind)
		}
		changed := false
		if p.Labels != nil {
			labels, err := patchLabels(r.Labels, p.Labels)
			if err != nil {
				return false, err
			}
			if !reflect.DeepEqual(labels, r.Labels) {
				r.Labels, changed = labels, true
			}
		}
		if p.Spec != nil {
			spec, err := prepareSpec(d, caller, r.Spec, p.Spec)
			if err != nil {
				return false, err
			}
			if problems := specProblems(d, spec); len(problems) > 0 {
				return false, &Error{Code: CodeInvalid, Message: fmt.Sprintf("the patched %s is not valid", d.Kind), Fields: problems}
			}
			var old map[string]any
			if err := json.Unmarshal(r.Spec, &old); err != nil {
				return false, fmt.Errorf("decode stored spec: %w", err)
			}
			if !reflect.DeepEqual(old, spec) {
				raw, err := json.Marshal(spec)
				if err != nil {
					return false, fmt.Errorf("encode spec: %w", err)
				}
				r.Spec, changed = raw, true
				r.Generation++
			}
		}
		if changed {
			r.UpdatedTime, r.UpdatedBy = s.now(), caller.Name
		}
		return changed, nil
	})
}

// Delete marks a resource and its descendants as deleting.
func (s *Service) Delete(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error) {
	if !validID(id) || (parentID != "" && !validID(parentID)) {
		return nil, notFound(d, id)
	}
	return s.store.MarkDeleted(ctx, d, parentID, id, CallerFrom(ctx).Name, s.now())
}

// prepareSpec turns a create body's spec (old == nil) or a merge patch of old into the spec to validate:
// it refuses internal fields from non-admins and fills defaults.
func prepareSpec(d *Descriptor, caller Caller, old json.RawMessage, doc json.RawMessage) (map[string]any, error) {
	var given map[string]any
	if len(doc) > 0 && string(doc) != "null" {
		if err := json.Unmarshal(doc, &given); err != nil {
			return nil, &Error{Code: CodeMalformed, Message: "spec must be a JSON object", Fields: []FieldError{{Field: "spec", Message: "must be an object"}}}
		}
	}
	if given == nil {
		given = map[string]any{}
	}
	if !caller.Admin {
		if internal := d.Spec.InternalFields(given); len(internal) > 0 {
			fields := make([]FieldError, len(internal))
			for i, f := range internal {
				fields[i] = FieldError{Field: "spec." + f, Message: "is an internal field: only an admin may set it"}
			}
			return nil, &Error{Code: CodeInternalField, Message: "internal spec fields are writable by admins only: " + strings.Join(internal, ", "), Fields: fields}
		}
	}
	if old == nil {
		return defaulted(d, given)
	}
	merged, err := jsonpatch.MergePatch(old, doc)
	if err != nil {
		return nil, &Error{Code: CodeMalformed, Message: "spec patch is not a valid JSON merge patch: " + err.Error()}
	}
	var spec map[string]any
	if err := json.Unmarshal(merged, &spec); err != nil || spec == nil {
		return nil, &Error{Code: CodeMalformed, Message: "spec patch must leave spec a JSON object"}
	}
	if spec, err = defaulted(d, spec); err != nil {
		return nil, err
	}
	if !caller.Admin {
		// A patch can also change internal fields without naming them, e.g. by nulling their parent object.
		var before map[string]any
		if err := json.Unmarshal(old, &before); err != nil {
			return nil, fmt.Errorf("decode stored spec: %w", err)
		}
		if changed := changedInternal(d, before, spec); len(changed) > 0 {
			return nil, &Error{Code: CodeInternalField, Message: "the patch would change internal spec fields, which admins only may write: " + strings.Join(changed, ", ")}
		}
	}
	return spec, nil
}

// defaulted fills the schema's defaults into spec and normalises it through JSON, so that the Go types of
// defaults (ints) become what decoding yields (float64) and comparing two specs is purely semantic.
func defaulted(d *Descriptor, spec map[string]any) (map[string]any, error) {
	if err := d.Spec.ApplyDefaults(spec); err != nil {
		return nil, &Error{Code: CodeInvalid, Message: "spec defaults could not be applied: " + err.Error()}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Message: "spec cannot be encoded: " + err.Error()}
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode normalised spec: %w", err)
	}
	return out, nil
}

// changedInternal returns the internal fields whose values differ between two defaulted specs.
func changedInternal(d *Descriptor, before, after map[string]any) []string {
	paths := append(d.Spec.InternalFields(before), d.Spec.InternalFields(after)...)
	sort.Strings(paths)
	var changed []string
	for i, p := range paths {
		if i > 0 && paths[i-1] == p {
			continue
		}
		if !reflect.DeepEqual(valueAt(before, p), valueAt(after, p)) {
			changed = append(changed, p)
		}
	}
	return changed
}

// valueAt follows a dotted path of object keys; internal fields are object properties, never array items.
func valueAt(v any, path string) any {
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}

func specProblems(d *Descriptor, spec map[string]any) []FieldError {
	problems := d.Spec.Validate(spec)
	for i := range problems {
		if problems[i].Field == "" {
			problems[i].Field = "spec"
		} else {
			problems[i].Field = "spec." + problems[i].Field
		}
	}
	return problems
}

func checkName(d *Descriptor, name string) []FieldError {
	switch {
	case len(name) < d.NameMin || len(name) > d.NameMax:
		return []FieldError{{Field: "name", Message: fmt.Sprintf("must be %d to %d characters long", d.NameMin, d.NameMax)}}
	case !dnsLabel.MatchString(name):
		return []FieldError{{Field: "name", Message: "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"}}
	}
	return nil
}

func checkLabels(labels map[string]string) []FieldError {
	var problems []FieldError
	if len(labels) > maxLabels {
		problems = append(problems, FieldError{Field: "labels", Message: fmt.Sprintf("at most %d labels", maxLabels)})
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) > maxLabelKeyLen || !labelKey.MatchString(k) {
			problems = append(problems, FieldError{Field: "labels." + k, Message: fmt.Sprintf("key must be 1 to %d characters of letters, digits, '.', '_', '/', '-', starting and ending with a letter or digit", maxLabelKeyLen)})
		}
		if len(labels[k]) > maxLabelValueLen {
			problems = append(problems, FieldError{Field: "labels." + k, Message: fmt.Sprintf("value must be at most %d characters", maxLabelValueLen)})
		}
	}
	return problems
}

func patchLabels(current map[string]string, doc json.RawMessage) (map[string]string, error) {
	var patch map[string]*string
	if err := json.Unmarshal(doc, &patch); err != nil {
		return nil, &Error{Code: CodeMalformed, Message: "labels patch must be an object of strings or nulls", Fields: []FieldError{{Field: "labels", Message: "must be an object of strings or nulls"}}}
	}
	labels := make(map[string]string, len(current)+len(patch))
	for k, v := range current {
		labels[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(labels, k)
		} else {
			labels[k] = *v
		}
	}
	if problems := checkLabels(labels); len(problems) > 0 {
		return nil, &Error{Code: CodeInvalid, Message: "the patched labels are not valid", Fields: problems}
	}
	return labels, nil
}

func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

func notFound(d *Descriptor, id string) error {
	return Errorf(CodeNotFound, "%s %q not found", d.Kind, id)
}

// NotFound returns the CodeNotFound error for a resource of kind d.
func NotFound(d *Descriptor, id string) error { return notFound(d, id) }
