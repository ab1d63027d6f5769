package placement

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/capacity"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// API is what the placer reads of hyperfleet-api; *adapter.API is one. List lists a page of a kind with the named
// adapters' reports; Report returns an adapter's report on one resource (nil when it has not reported; an error
// matching adapter.ErrNotFound when the resource is gone); IDs returns every resource id of a kind, deleting ones
// included.
type API interface {
	List(ctx context.Context, kind *adapter.Kind, parentID string, q adapter.ListQuery) (*adapter.ListPage, error)
	Report(ctx context.Context, kind *adapter.Kind, parentID, id, adapterName string) (*adapter.Report, error)
	IDs(ctx context.Context, kind *adapter.Kind) (map[string]bool, error)
}

var _ API = (*adapter.API)(nil)

// Reconciler places clusters on management clusters. API, Adapter and Applier are required (Check); zero
// intervals take the defaults. It must be the only decider: one Reconciler in one process (see the package
// documentation).
type Reconciler struct {
	API API
	// Adapter is the name the placer reports under: its own reports are where the ledger is rebuilt from.
	Adapter string
	// Applier is the adapter whose reports on management clusters say whether they are reachable, and whose
	// report on a deleting cluster says when its HostedCluster is gone.
	Applier string
	// ControlPlane is what each placed cluster counts against a management cluster's vCPU and memory budgets.
	ControlPlane ControlPlane
	// RetryInterval is how soon a cluster no management cluster takes is tried again.
	RetryInterval time.Duration
	// FinalizeInterval is how soon a deleting cluster whose HostedCluster is not gone yet is looked at again.
	FinalizeInterval time.Duration
	// Wake, when set, queues a cluster for a reconcile: the ledger's rebuild wakes the clusters its reports left
	// unplaced, since the API does not list them as pending (their report is at their generation).
	Wake func(clusterID string)
	// Log receives a line per placement and per freed slot; nil logs nothing.
	Log *slog.Logger

	// mu serialises every read and change of the ledger, and every decision with it, so that two clusters created
	// at once never take the last slot twice.
	mu sync.Mutex
	// ledger is nil until it has been rebuilt from the placer's reports.
	ledger *ledger

	// listMu guards pending: the next list of the management clusters, which the decisions that ask for one
	// while another is in flight join. listing is held while a list is made, one at a time.
	listMu  sync.Mutex
	pending *listing
	listing sync.Mutex
}

// listing is one list of the management clusters, shared by the decisions that joined it before it started.
type listing struct {
	joined int
	list   []Candidate
	err    error
}

var _ adapter.Reconciler = (*Reconciler)(nil)

// Check returns an error if a required dependency is missing; call it before running.
func (r *Reconciler) Check() error {
	switch {
	case r.API == nil:
		return errors.New("cluster placer: no API reader")
	case !conditions.ValidAdapterName(r.Adapter):
		return fmt.Errorf("cluster placer: adapter name %q is not one", r.Adapter)
	case !conditions.ValidAdapterName(r.Applier):
		return fmt.Errorf("cluster placer: applier adapter name %q is not one", r.Applier)
	case r.ControlPlane.VCPU < 1 || r.ControlPlane.MemoryGiB < 1:
		return errors.New("cluster placer: a control plane must count at least 1 vCPU and 1 GiB")
	}
	return nil
}

// Reconcile reports the cluster's placement: the one it has (a placement never changes), or a new one decided
// now, or why none fits.
func (r *Reconciler) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	want, err := wantOf(obj.Spec, r.ControlPlane)
	if err != nil {
		msg := "spec.placement: " + err.Error()
		return adapter.Outcome{
			Available:  conditions.Reported{Status: conditions.False, Reason: ReasonInvalidSpec, Message: msg},
			Conditions: []conditions.Reported{{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonInvalidSpec, Message: msg}},
		}, adapter.Terminal(ReasonInvalidSpec, err)
	}
	if p, ok, err := r.held(ctx, obj); err != nil {
		return failed(ReasonLedgerUnavailable, err)
	} else if ok {
		return placed(p), nil
	}
	// Listed outside the lock, so that decisions wait for each other only while they count: what must not race is
	// the ledger, not the management clusters' specs (a cordon that lands just after the list started is one that
	// landed a moment after this decision).
	candidates, err := r.candidates(ctx)
	if err != nil {
		return failed(ReasonManagementClustersUnavailable, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range candidates {
		candidates[i].Placed = r.ledger.count(candidates[i].Name)
	}
	name, reasons := Choose(candidates, want)
	if name == "" {
		return noCapacity(reasons, cmp.Or(r.RetryInterval, DefaultRetryInterval)), nil
	}
	p := Placement{ManagementCluster: name}
	for i := range candidates {
		if candidates[i].Name == name {
			p.Region = candidates[i].Region
		}
	}
	// Recorded before the report is posted: a cluster decided now counts for the next decision at once. Should
	// the post fail, the next reconcile reports the same placement from the ledger.
	r.ledger.add(obj.ID, p)
	r.log(ctx, "placed a cluster", slog.String("cluster", obj.Name), slog.String("id", obj.ID),
		slog.String("management_cluster", p.ManagementCluster), slog.String("region", p.Region),
		slog.Int("placed_there", r.ledger.count(p.ManagementCluster)))
	return placed(p), nil
}

// Finalize frees a deleted cluster's slot once the applier has removed its HostedCluster (its report says
// Finalized=True, or it never reported), and finalizes then; until then it keeps the slot and looks again every
// FinalizeInterval.
func (r *Reconciler) Finalize(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	if c := obj.LastReport.Condition(conditions.Finalized); c != nil && c.Status == conditions.True {
		// Freed already (the resource waits for other adapters): say the same again.
		if p, ok := dataPlacement(obj.LastReport); ok {
			return released(p), nil
		}
		return neverPlaced(), nil
	}
	p, ok, err := r.held(ctx, obj)
	if err != nil {
		return failed(ReasonLedgerUnavailable, err)
	}
	if !ok {
		return neverPlaced(), nil
	}
	retry := cmp.Or(r.FinalizeInterval, DefaultFinalizeInterval)
	rep, err := r.API.Report(ctx, adapter.Clusters(), obj.ParentID, obj.ID, r.Applier)
	switch {
	case errors.Is(err, adapter.ErrNotFound):
		// The cluster is gone, and with it every adapter's report: the applier has finalized it.
	case err != nil:
		return waiting(p, r.Applier, retry), adapter.Transient(ReasonApplierReportUnavailable,
			fmt.Errorf("read %s's report on the cluster: %w", r.Applier, err))
	case rep != nil && !conditions.IsTrue(rep.Conditions, conditions.Finalized):
		return waiting(p, r.Applier, retry), nil
	}
	// Finalized, or never reported: an applier that has not reported on the cluster has created nothing for it
	// that it would not remove on its first look at the deleted cluster.
	r.mu.Lock()
	r.ledger.remove(obj.ID)
	left := r.ledger.count(p.ManagementCluster)
	r.mu.Unlock()
	r.log(ctx, "freed a deleted cluster's slot", slog.String("cluster", obj.Name), slog.String("id", obj.ID),
		slog.String("management_cluster", p.ManagementCluster), slog.Int("placed_there", left))
	return released(p), nil
}

// held returns the placement the cluster holds, rebuilding the ledger first if it has not been. A placement its
// last report names that the ledger lacks is taken into the ledger: the report is what the applier obeys.
func (r *Reconciler) held(ctx context.Context, obj *adapter.Object) (Placement, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ensureLedgerLocked(ctx); err != nil {
		return Placement{}, false, err
	}
	if p, ok := r.ledger.get(obj.ID); ok {
		return p, true, nil
	}
	if p, ok := placementOf(obj.LastReport); ok {
		r.ledger.add(obj.ID, p)
		return p, true, nil
	}
	return Placement{}, false, nil
}

// EnsureLedger rebuilds the ledger from the placer's own reports if it has not been yet. Decisions call it; the
// adapter also calls it at start, so that the clusters left unplaced before a restart are woken.
func (r *Reconciler) EnsureLedger(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ensureLedgerLocked(ctx)
}

// ensureLedgerLocked is EnsureLedger with r.mu held. The lock is held through the rebuild on purpose: no decision
// may be made before every earlier placement is counted.
func (r *Reconciler) ensureLedgerLocked(ctx context.Context) error {
	if r.ledger != nil {
		return nil
	}
	l, unplaced, err := r.rebuild(ctx)
	if err != nil {
		return err
	}
	r.ledger = l
	r.log(ctx, "rebuilt the placements from the placer's reports", slog.Int("placed", l.len()), slog.Int("unplaced", len(unplaced)))
	if r.Wake != nil {
		for _, id := range unplaced {
			r.Wake(id)
		}
	}
	return nil
}

// rebuild reads every placement back from the placer's reports (deleting clusters included, since their slots are
// held until the applier has finalized them; finalized reports excluded, since theirs are free), a page of 500
// clusters per request. It also returns the live clusters whose report says they are not placed.
func (r *Reconciler) rebuild(ctx context.Context) (*ledger, []string, error) {
	l := newLedger()
	var unplaced []string
	q := adapter.ListQuery{Statuses: []string{r.Adapter}, IncludeDeleted: true}
	for {
		page, err := r.API.List(ctx, adapter.Clusters(), "", q)
		if err != nil {
			return nil, nil, fmt.Errorf("read back the placements: %w", err)
		}
		for i := range page.Items {
			it := &page.Items[i]
			rep := it.Reports[r.Adapter]
			if p, ok := placementOf(rep); ok {
				l.add(it.ID, p)
			} else if rep != nil && !it.Deleting {
				unplaced = append(unplaced, it.ID)
			}
		}
		if page.Next == "" {
			return l, unplaced, nil
		}
		q.After = page.Next
	}
}

// Prune drops the ledger's placements of clusters the API no longer has (removed without their finalizer: a
// force-delete) and returns how many it dropped. It does nothing before the ledger is built.
func (r *Reconciler) Prune(ctx context.Context) (int, error) {
	r.mu.Lock()
	if r.ledger == nil {
		r.mu.Unlock()
		return 0, nil
	}
	mark := r.ledger.mark()
	r.mu.Unlock()
	live, err := r.API.IDs(ctx, adapter.Clusters())
	if err != nil {
		return 0, fmt.Errorf("list the clusters: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.prune(live, mark), nil
}

// Placed returns how many clusters the ledger has on each management cluster; nil before it is built.
func (r *Reconciler) Placed() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ledger == nil {
		return nil
	}
	out := make(map[string]int, len(r.ledger.counts))
	for k, v := range r.ledger.counts {
		out[k] = v
	}
	return out
}

// candidates returns every management cluster as a decision sees it, from a list that started after the call: a
// decision never acts on a list older than itself (a cordon made before a create is always seen). Calls made
// while a list is in flight share the next one, so that a burst of creates costs a few lists, not one each. The
// slice is the caller's.
func (r *Reconciler) candidates(ctx context.Context) ([]Candidate, error) {
	r.listMu.Lock()
	l := r.pending
	if l == nil {
		l = &listing{}
		r.pending = l
	}
	l.joined++
	r.listMu.Unlock()

	r.listing.Lock()
	r.listMu.Lock()
	mine := r.pending == l // not started by another who joined it: this call makes it
	if mine {
		r.pending = nil
	}
	r.listMu.Unlock()
	if mine {
		l.list, l.err = r.listCandidates(ctx)
	}
	// Not mine: whoever started it held r.listing until it was done.
	r.listing.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	return slices.Clone(l.list), nil
}

// listCandidates lists every management cluster (deleting ones too, so that the reasons name them) with the
// applier's report on each, a page of 500 per request.
func (r *Reconciler) listCandidates(ctx context.Context) ([]Candidate, error) {
	out := []Candidate{} // not nil: an empty fleet is a list too

	q := adapter.ListQuery{Statuses: []string{r.Applier}, IncludeDeleted: true}
	for {
		page, err := r.API.List(ctx, api.Kinds().ManagementCluster, "", q)
		if err != nil {
			return nil, fmt.Errorf("list the management clusters: %w", err)
		}
		for i := range page.Items {
			out = append(out, candidateOf(&page.Items[i], r.Applier))
		}
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

// candidateOf reads a listed ManagementCluster. Reachability is the applier's latest report's Available, whatever
// its generation: a spec change (cordon, capacity, labels) the placer reads from the spec itself, and waiting
// for the applier to report each such change would stop placements on every capacity edit.
func candidateOf(it *adapter.Listed, applier string) Candidate {
	c := Candidate{Name: it.Name, Labels: it.Labels, Deleting: it.Deleting}
	var spec api.ManagementClusterSpec
	if err := json.Unmarshal(it.Spec, &spec); err != nil {
		c.Invalid = err.Error()
		return c
	}
	c.Region = deref(spec.Region)
	c.Cordoned = spec.Schedulable != nil && !*spec.Schedulable
	c.Capacity = capacity.BudgetOf(spec.Capacity)
	rep := it.Reports[applier]
	available := rep.Condition(conditions.Available)
	switch {
	case rep == nil:
		c.Unreachable = "not reported by " + applier
	case available == nil:
		c.Unreachable = applier + " reports no Available condition"
	case available.Status != conditions.True:
		c.Unreachable = cmp.Or(available.Reason, "Available="+string(available.Status))
	default:
		c.Reachable = true
	}
	return c
}

// wantOf reads what a cluster's spec.placement asks for.
func wantOf(spec json.RawMessage, cp ControlPlane) (Want, error) {
	want := Want{ControlPlane: cp}
	if len(spec) == 0 {
		return want, nil
	}
	var s struct {
		Placement *api.ClusterPlacement `json:"placement"`
	}
	if err := json.Unmarshal(spec, &s); err != nil {
		return want, fmt.Errorf("decode: %w", err)
	}
	if s.Placement != nil {
		want.Region = deref(s.Placement.Region)
		want.Selector = deref(s.Placement.ManagementClusterSelector)
	}
	return want, nil
}

func (r *Reconciler) log(ctx context.Context, msg string, attrs ...slog.Attr) {
	if r.Log != nil {
		r.Log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
