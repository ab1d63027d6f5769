package resource

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Store persists resources. Create, Get and List are single statements; everything that reads before it
// writes runs in InTx.
type Store interface {
	// Create inserts r (ID, times and generation already set). It returns an *Error with CodeNotFound if the
	// parent does not exist, CodeParentDeleting if it is being deleted, CodeNameTaken if a live sibling has the
	// name, and MissingReference if a name in refs has no live resource (those it has stay locked against
	// deletion while the insert runs).
	Create(ctx context.Context, d *Descriptor, r *Resource, refs []NamedRef) (*Resource, error)
	// Get returns the resource, or CodeNotFound (also when parentID is set and is not its parent).
	Get(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error)
	// List calls each with the resources of one page, in order, as it reads them (so that a page's memory does not
	// grow with its size), then returns the count of matches and the next page's cursor. An error from each stops
	// the listing and is returned.
	List(ctx context.Context, d *Descriptor, opts ListOptions, each func(*Resource) error) (ListResult, error)
	// Statuses returns the reports stored for a resource, ordered by adapter.
	Statuses(ctx context.Context, id string) ([]AdapterStatus, error)
	// SyncRequired makes the store's per-adapter bookkeeping match d.RequiredAdapters (placeholders that let
	// pending_for find resources an adapter has never reported on).
	SyncRequired(ctx context.Context, d *Descriptor) error
	// StaleAggregates returns up to limit ids, in id order after afterID, of resources of kind d whose aggregate
	// was computed for another set of required adapters.
	StaleAggregates(ctx context.Context, d *Descriptor, afterID string, limit int) ([]string, error)
	// History returns up to limit entries of the history of the resource id of kind d (under parentID when set)
	// with sequence numbers above after, oldest first, whether or not the resource still exists; CodeNotFound when
	// the caller sees none (a resource of another tenant as one that never existed).
	History(ctx context.Context, d *Descriptor, parentID, id string, after int64, limit int) ([]HistoryEntry, error)
	// InTx runs fn in one transaction that commits before InTx returns; it retries fn on deadlock or
	// serialization failure, so fn must not have effects outside tx.
	InTx(ctx context.Context, fn func(tx Tx) error) error
}

// Tx is the work one transaction can do. Rows read with Lock stay locked until the transaction ends.
type Tx interface {
	// Lock returns the resource locked for update, or CodeNotFound.
	Lock(d *Descriptor, parentID, id string) (*Resource, error)
	// LockIDs returns the resources of kind d with the given ids that exist, locked for update.
	LockIDs(d *Descriptor, ids []string) ([]*Resource, error)
	// LockChildren returns the live children of kind d under parentID, locked for update.
	LockChildren(d *Descriptor, parentID string) ([]*Resource, error)
	// Referenced reports whether a live resource of root kind d has the name, and locks it against deletion
	// until the transaction ends.
	Referenced(d *Descriptor, name string) (bool, error)
	// Referrers returns up to limit names of live resources of kind d whose spec field holds name.
	Referrers(d *Descriptor, field, name string, limit int) ([]string, error)
	// ReportReferrers returns up to limit names of resources of kind d (deleting ones too) about which adapter's
	// report holds name under data key, and how many there are in all.
	ReportReferrers(d *Descriptor, adapter, key, name string, limit int) ([]string, int, error)
	// HasChildren reports whether any resource of a child kind of d has id as its parent.
	HasChildren(d *Descriptor, id string) (bool, error)
	// Save writes r's labels, spec, generation, status and update/delete stamps, records that its status was
	// aggregated for d's current required adapters, and appends the change to the change feed as event.
	Save(d *Descriptor, r *Resource, event EventType) error
	// Statuses returns the stored reports of the given resources by resource id, each ordered by adapter.
	Statuses(ids []string) (map[string][]AdapterStatus, error)
	// LockReports locks the resource (CodeNotFound, also when parentID is set and is not its parent) and the
	// reports about it, and returns both as they are once locked: one round trip for a status write's reads.
	LockReports(d *Descriptor, parentID, id string) (*Resource, []AdapterStatus, error)
	// WriteReport stores st, the report of st.Adapter about r, unless the stored one is newer (then CodeStatusStale
	// and nothing is written), and with save also saves r as Save does with event and appends history (when not
	// nil) to r's history as RecordHistory does: one statement for a status write's writes.
	WriteReport(d *Descriptor, r *Resource, st *AdapterStatus, save bool, event EventType, history *HistoryEntry) error
	// Remove deletes the resource, its descendants and all their reports, appending a removed event for each and
	// a history entry of action (HistoryRemoved or HistoryForceDeleted) by the transaction's caller.
	Remove(d *Descriptor, id string, action HistoryAction) error
	// RecordHistory appends e (its Seq is assigned) to the history of r, in r's tenant.
	RecordHistory(d *Descriptor, r *Resource, e HistoryEntry) error
	// Create is Store.Create inside the transaction.
	Create(d *Descriptor, r *Resource, refs []NamedRef) (*Resource, error)
	// CheckQuota locks tenant's quotas until the transaction ends and returns a CodeQuotaExceeded error when amount
	// more of d's quota (Descriptor.Quota) would take the tenant's live resources of d past it; excludeID, when
	// set, is a resource whose current use amount replaces.
	CheckQuota(d *Descriptor, tenant, excludeID string, amount int64) error
	// CheckShardLease locks adapter's lease on shard against a change of holder until the transaction ends, and
	// returns a CodeLeaseLost error unless generation is its current holder's under shard count count.
	CheckShardLease(adapter string, shard, count int, generation int64) error
	// Flush returns the errors of the writes the Tx has not sent yet: a Tx may hold WriteReport's and Create's
	// statement back to send it with the next statement or the commit (one round trip fewer), and they surface
	// then. What only checks, like a dry run, flushes before it rolls back.
	Flush() error
}

// Observer is told the outcome of status writes and aggregations, for metrics.
type Observer interface {
	// StatusWritten reports one status report about a resource of kind: "created", "updated", "unchanged" (the
	// same as the stored one, within a heartbeat: nothing written), "stale", "invalid" or "error".
	StatusWritten(kind, outcome string)
	// Aggregated reports a recomputed aggregate of a resource of kind and whether it differed from the stored one.
	Aggregated(kind string, phase conditions.Phase, changed bool)
}

type noObserver struct{}

func (noObserver) StatusWritten(string, string)              {}
func (noObserver) Aggregated(string, conditions.Phase, bool) {}

// Service applies the API's rules to any kind of resource.
type Service struct {
	store    Store
	children map[*Descriptor][]*Descriptor
	// referrers are, per kind, the kinds whose spec names resources of it.
	referrers map[*Descriptor][]referrer
	// reportReferrers are, per kind, the kinds whose adapters' reports name resources of it.
	reportReferrers map[*Descriptor][]reportReferrer
	observer        Observer
	now             func() time.Time
	// heartbeat bounds how long an unchanged report may go unwritten (SuppressUnchangedReports); 0 writes all.
	heartbeat time.Duration
}

// NewService returns a Service over store for the given kinds.
func NewService(store Store, kinds []*Descriptor) *Service {
	children := map[*Descriptor][]*Descriptor{}
	referrers := map[*Descriptor][]referrer{}
	reportReferrers := map[*Descriptor][]reportReferrer{}
	for _, k := range kinds {
		for _, ref := range k.ReportedReferences {
			reportReferrers[ref.Kind] = append(reportReferrers[ref.Kind], reportReferrer{kind: k, adapter: ref.Adapter, key: ref.DataKey})
		}
		if k.Parent != nil {
			children[k.Parent] = append(children[k.Parent], k)
		}
		for _, ref := range k.References {
			referrers[ref.Kind] = append(referrers[ref.Kind], referrer{kind: k, field: ref.Field})
		}
	}
	return &Service{store: store, children: children, referrers: referrers, reportReferrers: reportReferrers, observer: noObserver{},
		now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// SuppressUnchangedReports makes PutStatus skip the write of a report identical to the stored one while the
// stored one is younger than heartbeat (0, the default, writes every report). The stored report's
// last_report_time then lags the adapter's last re-check by up to heartbeat, and what reads it must allow for
// that: the runtime's resync (pkg/adapter Config.ResyncAfter, off by default and meant in many minutes) lists a
// resource whose report is older than its resync again, so a resync at or under heartbeat would re-check such a
// resource on every poll until the row moves; stuck-work metrics and alerts judge the pending flag, which an
// unchanged report does not change. Call it while wiring, before serving.
func (s *Service) SuppressUnchangedReports(heartbeat time.Duration) { s.heartbeat = heartbeat }

// Observe makes o the service's observer; call it while wiring, before serving.
func (s *Service) Observe(o Observer) { s.observer = o }

// checkIDs answers CodeNotFound for ids that cannot exist, before they reach the database as casts that fail.
func checkIDs(d *Descriptor, parentID, id string) error {
	if !validID(id) || (parentID != "" && !validID(parentID)) {
		return notFound(d, id)
	}
	return nil
}

// withLocked runs fn in a transaction on the resource locked for update and returns the resource as fn left it.
func (s *Service) withLocked(ctx context.Context, d *Descriptor, parentID, id string, fn func(tx Tx, r *Resource) error) (*Resource, error) {
	if err := checkIDs(d, parentID, id); err != nil {
		return nil, err
	}
	var out *Resource
	err := s.store.InTx(ctx, func(tx Tx) error {
		r, err := tx.Lock(d, parentID, id)
		if err != nil {
			return err
		}
		out = r
		return fn(tx, r)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CreateInput is what a client sends to create a resource.
type CreateInput struct {
	Name   string
	Labels map[string]string
	Spec   json.RawMessage
	// DeletionProtection makes deletes fail until a PATCH clears it.
	DeletionProtection bool
	// DryRun checks everything a create checks (validation, names, references, quota) and stores nothing.
	DryRun bool
}

// Patch is an RFC 7386 merge patch of labels and/or spec; a nil member leaves that part alone.
type Patch struct {
	Labels json.RawMessage
	Spec   json.RawMessage
	// Force applies a spec change that the kind's transition rules (Descriptor.Transition) refuse. Only admins may
	// force: for anyone else the update fails with CodeForbidden.
	Force bool
	// DeletionProtection, when not nil, sets or clears the resource's delete guard.
	DeletionProtection *bool
}

// MaxSpecBytes bounds a resource's stored spec (defaults included): every field has a bound, and this caps what
// their sum, nested free-form blocks included, may reach.
const MaxSpecBytes = 128 << 10

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
	// A global kind's rows belong to no tenant: a confined caller (a platform operator) writes them as they are.
	ctx = unconfined(ctx, d)
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
	raw, err := encodeSpec(spec)
	if err != nil {
		return nil, err
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
		Generation: 1, Version: 1, CreatedTime: now, UpdatedTime: now, CreatedBy: caller.Name, UpdatedBy: caller.Name,
		Tenant: DefaultTenant, DeletionProtection: in.DeletionProtection,
	}
	if d.Tenanted {
		r.Tenant = caller.NewTenant() // a child's is its parent's, which the store sets
	}
	r.Status, _ = Aggregate(d, r, nil, now)
	refs := namedRefs(d, spec)
	if d.Quota == nil && !in.DryRun {
		return s.store.Create(ctx, d, r, refs)
	}
	var created *Resource
	err = s.store.InTx(ctx, func(tx Tx) error {
		if d.Quota != nil {
			tenant := r.Tenant
			if d.Parent != nil {
				parent, err := tx.Lock(d.Parent, "", parentID)
				if err != nil {
					return err
				}
				tenant = parent.Tenant
			}
			if err := tx.CheckQuota(d, tenant, "", d.Quota.Amount(spec)); err != nil {
				return err
			}
		}
		var err error
		if created, err = tx.Create(d, r, refs); err != nil {
			return err
		}
		if in.DryRun {
			if err := tx.Flush(); err != nil {
				return err
			}
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return created, nil
	}
	return created, err
}

// errDryRun rolls back a dry run's transaction once everything it checks has passed.
var errDryRun = errors.New("dry run")

// unconfined returns ctx with its caller allowed to see every tenant when d is a global kind: its rows belong to no
// tenant (every tenant reads them, their reports and history), and its references and in-use checks must count
// every tenant's resources, not only the caller's. Every Service method that takes a kind starts with it, so that
// this rule lives here and not in each store query.
func unconfined(ctx context.Context, d *Descriptor) context.Context {
	if d.Tenanted {
		return ctx
	}
	c := CallerFrom(ctx)
	c.AllTenants = true
	return WithCaller(ctx, c)
}

// checkUnprotected refuses to delete r while it, or a live descendant, has deletion protection on.
func (s *Service) checkUnprotected(tx Tx, d *Descriptor, r *Resource) error {
	if r.DeletionProtection {
		return Errorf(CodeDeletionProtected, "%s %q has deletion protection on: clear it first with a PATCH of {\"deletion_protection\": false}", d.Kind, r.Name)
	}
	for _, child := range s.children[d] {
		kids, err := tx.LockChildren(child, r.ID)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := s.checkUnprotected(tx, child, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Get returns one resource; parentID, when set, must be its parent.
func (s *Service) Get(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error) {
	if err := checkIDs(d, parentID, id); err != nil {
		return nil, err
	}
	ctx = unconfined(ctx, d)
	return s.store.Get(ctx, d, parentID, id)
}

// List returns a page of resources. A list under a parent that does not exist is CodeNotFound.
func (s *Service) List(ctx context.Context, d *Descriptor, opts ListOptions, each func(*Resource) error) (ListResult, error) {
	ctx = unconfined(ctx, d)
	if opts.ParentID != "" && !validID(opts.ParentID) {
		return ListResult{}, notFound(d.Parent, opts.ParentID)
	}
	if opts.PendingFor != "" && (len(opts.PendingFor) > 63 || !dnsLabel.MatchString(opts.PendingFor)) {
		return ListResult{}, &Error{Code: CodeBadListParam, Message: "pending_for must be an adapter name (a DNS label)",
			Fields: []FieldError{{Field: "pending_for", Message: "must be a DNS label"}}}
	}
	if opts.ResyncAfter < 0 || (opts.ResyncAfter > 0 && opts.PendingFor == "") {
		return ListResult{}, &Error{Code: CodeBadListParam, Message: "resync_after must be a positive duration and goes with pending_for",
			Fields: []FieldError{{Field: "resync_after", Message: "must be positive, with pending_for"}}}
	}
	if err := checkListStatuses(opts.Statuses); err != nil {
		return ListResult{}, err
	}
	if opts.After != "" && opts.Page > 1 {
		return ListResult{}, &Error{Code: CodeBadListParam, Message: "give page or after, not both: after continues from a cursor",
			Fields: []FieldError{{Field: "after", Message: "not with page"}}}
	}
	seen := 0
	res, err := s.store.List(ctx, d, opts, func(r *Resource) error {
		seen++
		return each(r)
	})
	if err != nil {
		return ListResult{}, err
	}
	// Only an empty page can hide a missing parent, so only then pay for the look-up.
	if opts.ParentID != "" && seen == 0 {
		if _, err := s.store.Get(ctx, d.Parent, "", opts.ParentID); err != nil {
			return ListResult{}, err
		}
	}
	return res, nil
}

// Update applies p to a resource. ifMatch, when not nil, is the version (ETag) the client read (else
// CodeVersionMismatch): any write since, labels and status included, fails the update. The generation increments
// only when the spec changes semantically.
func (s *Service) Update(ctx context.Context, d *Descriptor, parentID, id string, p Patch, ifMatch *int64) (*Resource, error) {
	if p.Labels == nil && p.Spec == nil && p.DeletionProtection == nil {
		return nil, &Error{Code: CodeInvalid, Message: "the patch changes nothing: give spec, labels and/or deletion_protection"}
	}
	ctx = unconfined(ctx, d)
	caller := CallerFrom(ctx)
	if p.Force && !caller.Admin {
		return nil, &Error{Code: CodeForbidden, Message: "force=true (a change the kind's rules refuse) requires role admin"}
	}
	return s.withLocked(ctx, d, parentID, id, func(tx Tx, r *Resource) error {
		if ifMatch != nil && *ifMatch != r.Version {
			return Errorf(CodeVersionMismatch, `the %s has changed since version "%d": it is at "%d"; read it again`, d.Kind, *ifMatch, r.Version)
		}
		if r.Deleting() {
			return Errorf(CodeDeleting, "the %s is being deleted and can no longer change", d.Kind)
		}
		before, phase := historyDocOf(r), r.Status.Phase
		changed := false
		if p.DeletionProtection != nil && *p.DeletionProtection != r.DeletionProtection {
			r.DeletionProtection, changed = *p.DeletionProtection, true
		}
		if p.Labels != nil {
			labels, err := patchLabels(r.Labels, p.Labels)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(labels, r.Labels) {
				r.Labels, changed = labels, true
			}
		}
		if p.Spec != nil {
			spec, err := prepareSpec(d, caller, r.Spec, p.Spec)
			if err != nil {
				return err
			}
			if problems := specProblems(d, spec); len(problems) > 0 {
				return &Error{Code: CodeInvalid, Message: fmt.Sprintf("the patched %s is not valid", d.Kind), Fields: problems}
			}
			var old map[string]any
			if err := json.Unmarshal(r.Spec, &old); err != nil {
				return fmt.Errorf("decode stored spec: %w", err)
			}
			if err := checkImmutable(d, r.Spec, spec); err != nil {
				return err
			}
			if d.Transition != nil && !p.Force {
				if err := checkTransition(d, old, spec); err != nil {
					return err
				}
			}
			for _, ref := range changedRefs(d, old, spec) {
				if ok, err := tx.Referenced(ref.Kind, ref.Name); err != nil || !ok {
					return cmp.Or(err, MissingReference(ref))
				}
			}
			if d.Quota != nil && d.Quota.Amount(spec) > d.Quota.Amount(old) {
				if err := tx.CheckQuota(d, r.Tenant, r.ID, d.Quota.Amount(spec)); err != nil {
					return err
				}
			}
			if !reflect.DeepEqual(old, spec) {
				raw, err := encodeSpec(spec)
				if err != nil {
					return err
				}
				r.Spec, changed = raw, true
				r.Generation++
			}
		}
		if !changed {
			return nil
		}
		r.UpdatedTime, r.UpdatedBy = s.now(), caller.Name
		// A new generation makes every adapter's report out of date: the aggregate must say so at once.
		if _, err := s.reaggregateOne(tx, d, r); err != nil {
			return err
		}
		if err := tx.Save(d, r, EventUpdated); err != nil {
			return err
		}
		changes, err := changesBetween(before, r)
		if err != nil {
			return err
		}
		from, to := phaseMove(phase, r.Status.Phase)
		return tx.RecordHistory(d, r, HistoryEntry{Time: r.UpdatedTime, Actor: caller.Name, Action: HistoryUpdated,
			Generation: r.Generation, Changes: changes, PhaseFrom: from, PhaseTo: to})
	})
}

// Delete marks a resource and its descendants as deleting: each gets deleted time and caller and a new
// generation, which tells adapters to clean up. A resource none of whose required adapters has anything to
// finalize (a kind without required adapters) and that has no children left is removed at once.
func (s *Service) Delete(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error) {
	by, now := CallerFrom(ctx).Name, s.now()
	ctx = unconfined(ctx, d)
	return s.withLocked(ctx, d, parentID, id, func(tx Tx, r *Resource) error {
		if r.Deleting() {
			return nil
		}
		if err := s.checkUnprotected(tx, d, r); err != nil {
			return err
		}
		if err := s.checkNotReferenced(tx, d, r); err != nil {
			return err
		}
		_, err := s.markDeleted(tx, d, r, by, now)
		return err
	})
}

// markDeleted marks r and its live descendants, re-aggregates them, and removes those that are already
// finalized and childless, deepest first. It reports whether r itself was removed.
func (s *Service) markDeleted(tx Tx, d *Descriptor, r *Resource, by string, now time.Time) (bool, error) {
	phase := r.Status.Phase
	r.DeletedTime, r.DeletedBy, r.Generation = &now, by, r.Generation+1
	r.UpdatedTime, r.UpdatedBy = now, by
	for _, child := range s.children[d] {
		kids, err := tx.LockChildren(child, r.ID)
		if err != nil {
			return false, err
		}
		for _, k := range kids {
			if _, err := s.markDeleted(tx, child, k, by, now); err != nil {
				return false, err
			}
		}
	}
	finalized, err := s.reaggregateOne(tx, d, r)
	if err != nil {
		return false, err
	}
	if err := tx.Save(d, r, EventDeleting); err != nil {
		return false, err
	}
	from, to := phaseMove(phase, r.Status.Phase)
	if err := tx.RecordHistory(d, r, HistoryEntry{Time: now, Actor: by, Action: HistoryDeleting, Generation: r.Generation,
		PhaseFrom: from, PhaseTo: to}); err != nil {
		return false, err
	}
	return s.removeIfDone(tx, d, r, finalized, nil)
}

// removeIfDone removes a deleting resource once every required adapter has finalized it and no children
// remain, and then gives its parent the same chance: the last node pool to go can complete its cluster's delete.
// removeIfDone removes r when it is deleting and finalized, and then its parent when that was waiting only for
// r. removed, when not nil, is told of each resource removed.
func (s *Service) removeIfDone(tx Tx, d *Descriptor, r *Resource, finalized bool, removed func(*Descriptor, *Resource)) (bool, error) {
	if !r.Deleting() || !finalized {
		return false, nil
	}
	if has, err := tx.HasChildren(d, r.ID); err != nil || has {
		return false, err
	}
	if err := tx.Remove(d, r.ID, HistoryRemoved); err != nil {
		return false, err
	}
	if removed != nil {
		removed(d, r)
	}
	if d.Parent == nil {
		return true, nil
	}
	parent, err := tx.Lock(d.Parent, "", r.ParentID)
	if err != nil {
		return true, err
	}
	if !parent.Deleting() {
		return true, nil
	}
	parentFinalized, err := s.reaggregateOne(tx, d.Parent, parent)
	if err != nil {
		return true, err
	}
	_, err = s.removeIfDone(tx, d.Parent, parent, parentFinalized, removed)
	return true, err
}

// reaggregateOne recomputes r's status from its stored reports and reports whether its required adapters have
// all finalized it.
func (s *Service) reaggregateOne(tx Tx, d *Descriptor, r *Resource) (bool, error) {
	reports, err := tx.Statuses([]string{r.ID})
	if err != nil {
		return false, err
	}
	var finalized bool
	r.Status, finalized = Aggregate(d, r, reports[r.ID], s.now())
	return finalized, nil
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
		// Defaults the schema gained since the spec was stored are not the patch's doing.
		if before, err = defaulted(d, before); err != nil {
			return nil, err
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

// checkImmutable refuses a spec whose immutable fields differ from the stored spec's. Defaults the schema gained
// since the spec was stored count as what it had.
func checkImmutable(d *Descriptor, stored json.RawMessage, spec map[string]any) error {
	paths := d.Spec.ImmutableFields()
	if len(paths) == 0 {
		return nil
	}
	var before map[string]any
	if err := json.Unmarshal(stored, &before); err != nil {
		return fmt.Errorf("decode stored spec: %w", err)
	}
	before, err := defaulted(d, before)
	if err != nil {
		return err
	}
	var fields []FieldError
	for _, p := range paths {
		if !reflect.DeepEqual(valueAt(before, p), valueAt(spec, p)) {
			fields = append(fields, FieldError{Field: "spec." + p, Message: "cannot change once the " + d.Kind + " exists"})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Field
	}
	msg := "immutable spec fields would change: " + strings.Join(names, ", ")
	if d.ImmutableHint != "" {
		msg += "; " + d.ImmutableHint
	}
	return &Error{Code: CodeImmutable, Message: msg, Fields: fields}
}

// checkTransition asks the kind's transition rule about a change from the stored spec to spec (defaulted), with
// the stored spec defaulted as the schema now defaults it. The rule's refusal is returned as it is.
func checkTransition(d *Descriptor, stored, spec map[string]any) error {
	raw, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("encode stored spec: %w", err)
	}
	var before map[string]any
	if err := json.Unmarshal(raw, &before); err != nil { // a copy: defaulting writes into it
		return fmt.Errorf("decode stored spec: %w", err)
	}
	if before, err = defaulted(d, before); err != nil {
		return err
	}
	return d.Transition(before, spec)
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

// valueAt follows a path as InternalFields writes it: object keys joined by '.', array items as "[i]"
// (e.g. "nodes[0].secret"). A path that does not lead anywhere yields nil.
func valueAt(v any, path string) any {
	for _, step := range strings.Split(path, ".") {
		name, indexes, _ := strings.Cut(step, "[")
		if name != "" {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[name]
		}
		if indexes == "" {
			continue
		}
		for _, ix := range strings.Split(strings.TrimSuffix(indexes, "]"), "][") {
			i, err := strconv.Atoi(ix)
			items, ok := v.([]any)
			if err != nil || !ok || i < 0 || i >= len(items) {
				return nil
			}
			v = items[i]
		}
	}
	return v
}

// encodeSpec encodes a validated spec, refusing one over MaxSpecBytes.
func encodeSpec(spec map[string]any) (json.RawMessage, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	if len(raw) > MaxSpecBytes {
		msg := fmt.Sprintf("must be at most %d bytes of JSON, defaults included; it is %d", MaxSpecBytes, len(raw))
		return nil, &Error{Code: CodeInvalid, Message: "the spec is too large: " + msg, Fields: []FieldError{{Field: "spec", Message: msg}}}
	}
	return raw, nil
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

// ReaggregateHooks lets the caller of Reaggregate follow it.
type ReaggregateHooks struct {
	// Progress, when not nil, is called after each batch with the running total.
	Progress func(done int)
	// Removed, when not nil, is called for each resource removed (a deleting one that no adapter of the new set
	// still has to finalize, or its parent that waited only for it), once its removal is committed.
	Removed func(*Resource)
}

// Reaggregate brings every resource of kind d whose aggregate was computed for another set of required adapters
// up to date (and removes deleting ones that no longer wait for anyone), in batches. Run at start-up, it makes a
// change of required adapters take effect for the whole fleet. It returns how many resources it recomputed.
func (s *Service) Reaggregate(ctx context.Context, d *Descriptor, batch int, hooks ReaggregateHooks) (int, error) {
	// Resources aggregated for the current set also got its placeholders when created: with none stale, there is
	// nothing to sync, and a start-up over a large fleet stays cheap.
	if stale, err := s.store.StaleAggregates(ctx, d, "", 1); err != nil || len(stale) == 0 {
		return 0, err
	}
	if err := s.store.SyncRequired(ctx, d); err != nil {
		return 0, err
	}
	done, after := 0, ""
	for {
		ids, err := s.store.StaleAggregates(ctx, d, after, batch)
		if err != nil || len(ids) == 0 {
			return done, err
		}
		after = ids[len(ids)-1]
		var removed []*Resource
		err = s.store.InTx(ctx, func(tx Tx) error {
			removed = removed[:0] // a retried transaction starts over
			rs, err := tx.LockIDs(d, ids)
			if err != nil {
				return err
			}
			reports, err := tx.Statuses(ids)
			if err != nil {
				return err
			}
			for _, r := range rs {
				var finalized bool
				r.Status, finalized = Aggregate(d, r, reports[r.ID], s.now())
				if err := tx.Save(d, r, EventStatus); err != nil {
					return err
				}
				if _, err := s.removeIfDone(tx, d, r, finalized, func(_ *Descriptor, gone *Resource) { removed = append(removed, gone) }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return done, err
		}
		done += len(ids)
		if hooks.Removed != nil {
			for _, r := range removed {
				hooks.Removed(r)
			}
		}
		if hooks.Progress != nil {
			hooks.Progress(done)
		}
	}
}

// checkListStatuses refuses a list's adapter names (ListOptions.Statuses) that are not adapter names, or too many.
func checkListStatuses(adapters []string) error {
	if len(adapters) > MaxListStatuses {
		return &Error{Code: CodeBadListParam, Message: fmt.Sprintf("statuses names %d adapters; at most %d", len(adapters), MaxListStatuses),
			Fields: []FieldError{{Field: "statuses", Message: fmt.Sprintf("at most %d adapters", MaxListStatuses)}}}
	}
	for _, a := range adapters {
		if len(a) > 63 || !dnsLabel.MatchString(a) {
			return &Error{Code: CodeBadListParam, Message: fmt.Sprintf("statuses: %q is not an adapter name (a DNS label)", a),
				Fields: []FieldError{{Field: "statuses", Message: "each must be a DNS label"}}}
		}
	}
	return nil
}
