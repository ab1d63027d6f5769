// Package hostedcluster is the hostedcluster-applier adapter: it turns each Cluster into a HyperShift
// HostedCluster on a management cluster, with the release image its VersionStream resolves to, rolled only inside
// the cluster's UpgradeSchedule, and reports back what HyperShift says.
package hostedcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// Name is the adapter name the applier reports under.
const Name = "hostedcluster-applier"

// ManagementCluster is what the reconciler needs of the management cluster. Its writes carry preconditions, so
// that what the applier checked (the object is its own, or there is none) still holds when it writes.
type ManagementCluster interface {
	// HostedCluster returns the HostedCluster named name in the applier's namespace, or nil.
	HostedCluster(ctx context.Context, name string) (*unstructured.Unstructured, error)
	// Secret returns the Secret named name in the applier's namespace, or nil.
	Secret(ctx context.Context, name string) (*unstructured.Unstructured, error)
	// Secrets returns the applier's Secrets labelled with the cluster id clusterID.
	Secrets(ctx context.Context, clusterID string) ([]*unstructured.Unstructured, error)
	// Create creates obj if there is no object of its name (ErrExists otherwise) and returns it as stored.
	Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Update server-side applies obj over live, the object as read, only if it has not changed since (ErrChanged
	// otherwise), and returns it as stored.
	Update(ctx context.Context, obj, live *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Delete deletes live only if the object of its name still has live's UID (ErrChanged otherwise); nil when
	// it is gone.
	Delete(ctx context.Context, live *unstructured.Unstructured) error
}

// freshness is a ManagementCluster whose reads come from watch caches that may stop following it: Fresh returns
// ErrCacheStale (wrapped) when they have.
type freshness interface {
	Fresh() error
}

// fresh returns why p's reads cannot be believed now, or nil.
func fresh(p Placement) error {
	if f, ok := p.Cluster.(freshness); ok {
		return f.Fresh()
	}
	return nil
}

// Placement is the management cluster a cluster's HostedCluster lives on.
type Placement struct {
	// Name is the ManagementCluster's name; empty for the one management cluster of an applier given --kubeconfig.
	Name string
	// Namespace holds the HostedCluster and its Secrets there.
	Namespace string
	// Cluster reaches it.
	Cluster ManagementCluster
}

// Placements tells the reconciler where each cluster goes.
type Placements interface {
	// Place returns the management cluster obj's HostedCluster lives on. The error matches ErrNotPlaced when none
	// has been chosen for it yet, ErrManagementClusterUnreachable when the chosen one cannot be reached now (with
	// the cause), and ErrManagementClusterNotFound, ErrCredentialsNotFound or ErrCredentialsInvalid when it cannot
	// be used at all; the returned Placement's Name is set whenever the choice is known, error or not.
	Place(ctx context.Context, obj *adapter.Object) (Placement, error)
	// Forget is told that the cluster clusterID is finalized, so that what was kept about it can go.
	Forget(clusterID string)
}

// Errors of Placements.Place; the reconciler turns each into a reason (placementReason).
var (
	ErrNotPlaced                    = errors.New("the cluster-placer has not placed the cluster on a management cluster yet")
	ErrManagementClusterUnreachable = errors.New("management cluster unreachable")
	ErrManagementClusterNotFound    = errors.New("management cluster not found")
	ErrCredentialsNotFound          = errors.New("management cluster credentials not found")
	ErrCredentialsInvalid           = errors.New("management cluster credentials invalid")
)

// fixedPlacement is the applier's one management cluster, given --kubeconfig: every cluster goes there, and no
// placement is read.
type fixedPlacement struct{ placement Placement }

func (f fixedPlacement) Place(context.Context, *adapter.Object) (Placement, error) {
	return f.placement, nil
}
func (fixedPlacement) Forget(string) {}

// References reads what a cluster names.
type References interface {
	// Stream returns the rollout of the VersionStream named name (the version resolver's report and the stream's
	// policy); ErrStreamNotFound, ErrImagePending.
	Stream(ctx context.Context, name string) (StreamRollout, error)
	// Schedule returns the UpgradeSchedule named name; ErrScheduleNotFound.
	Schedule(ctx context.Context, name string) (*schedule.Schedule, error)
}

// Reconciler applies HostedClusters. References and PullSecret are required, and either Placements or Cluster
// and Namespace; Check says which is missing.
type Reconciler struct {
	// Cluster and Namespace are the one management cluster every cluster goes to when Placements is nil.
	Cluster    ManagementCluster
	References References
	// PullSecret returns the pull secret to write into each cluster's pull-secret Secret.
	PullSecret func() ([]byte, error)
	// Namespace is where HostedClusters and their Secrets live on the management cluster.
	Namespace string
	// ProgressInterval is how soon a cluster HyperShift is still working on is looked at again, should no watch
	// event come first; zero is DefaultProgressInterval.
	ProgressInterval time.Duration
	// Now is the clock of upgrade windows and of the pacer; nil is time.Now.
	Now func() time.Time
	// Pacer paces the re-applies no spec change asked for (see reapplyIsPaced); nil applies them at once.
	Pacer *Pacer
	// Placements says which management cluster each cluster goes to (the applier given many); nil sends every
	// cluster to Cluster, in Namespace.
	Placements Placements
	// PlacementRetry is how soon a cluster not placed yet is looked at again; zero is DefaultPlacementRetry.
	PlacementRetry time.Duration
	// Metrics counts the drift set back; nil counts nothing.
	Metrics *Metrics
	// Log says what was set back and deleted; nil is slog.Default.
	Log *slog.Logger
}

// DefaultPlacementRetry is how often the applier looks again at a cluster the placer has not placed yet: the
// placer tries every few seconds, and its report wakes nothing in the applier.
const DefaultPlacementRetry = 2 * time.Second

// DefaultProgressInterval is the safety net behind the watch while HyperShift works on a cluster.
const DefaultProgressInterval = 30 * time.Second

var _ adapter.Reconciler = (*Reconciler)(nil)

// Check returns an error naming a required dependency that is missing; call it before running.
func (r *Reconciler) Check() error {
	switch {
	case r.Placements == nil && r.Cluster == nil:
		return errors.New("hostedcluster applier: no management cluster")
	case r.References == nil:
		return errors.New("hostedcluster applier: no reader of version streams and schedules")
	case r.PullSecret == nil:
		return errors.New("hostedcluster applier: no pull secret")
	case r.Placements == nil && r.Namespace == "":
		return errors.New("hostedcluster applier: no namespace")
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Reconciler) placements() Placements {
	if r.Placements == nil {
		return fixedPlacement{Placement{Namespace: r.Namespace, Cluster: r.Cluster}}
	}
	return r.Placements
}

func (r *Reconciler) placementRetry() time.Duration {
	if r.PlacementRetry <= 0 {
		return DefaultPlacementRetry
	}
	return r.PlacementRetry
}

func (r *Reconciler) progressInterval() time.Duration {
	if r.ProgressInterval <= 0 {
		return DefaultProgressInterval
	}
	return r.ProgressInterval
}

// Reconcile applies the cluster's HostedCluster (and its Secrets) and reports what HyperShift says about it. What
// the applier must remember of the cluster (DataHostedClusterUID, DataRecreateToken) is carried into every report,
// whatever this reconcile found, so that one failed reconcile cannot make it forget it had made a HostedCluster.
func (r *Reconciler) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	out, err := r.reconcile(ctx, obj)
	remember(&out, memoryOf(obj.LastReport))
	return out, err
}

func (r *Reconciler) reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	var spec api.ClusterSpec
	if err := json.Unmarshal(obj.Spec, &spec); err != nil {
		return failed(ReasonInvalidSpec, err), adapter.Terminal(ReasonInvalidSpec, fmt.Errorf("decode cluster spec: %w", err))
	}
	stream, err := r.References.Stream(ctx, spec.VersionStream)
	switch {
	case errors.Is(err, ErrStreamNotFound):
		return failed(ReasonVersionStreamNotFound, err), adapter.Transient(ReasonVersionStreamNotFound, err)
	case errors.Is(err, ErrImagePending):
		return failed(ReasonReleaseImagePending, err), adapter.Transient(ReasonReleaseImagePending, err)
	case err != nil:
		return adapter.Outcome{}, err
	}
	var sched *schedule.Schedule
	if spec.UpgradeSchedule != nil {
		if sched, err = r.References.Schedule(ctx, *spec.UpgradeSchedule); err != nil {
			if errors.Is(err, ErrScheduleNotFound) {
				return failed(ReasonScheduleNotFound, err), adapter.Transient(ReasonScheduleNotFound, err)
			}
			return adapter.Outcome{}, err
		}
	}
	p, err := r.placements().Place(ctx, obj)
	if err != nil {
		return r.unplaced(p, err)
	}
	if err := fresh(p); err != nil {
		return r.unplaced(p, err)
	}
	out, err := r.apply(ctx, obj, &spec, p, stream, sched)
	if p.Name != "" {
		if out.Data == nil {
			out.Data = map[string]any{}
		}
		out.Data[DataManagementCluster] = p.Name
	}
	return out, err
}

// apply is Reconcile on the management cluster p: it applies what the plan says and reports what HyperShift says.
func (r *Reconciler) apply(ctx context.Context, obj *adapter.Object, spec *api.ClusterSpec, p Placement, stream StreamRollout,
	sched *schedule.Schedule,
) (adapter.Outcome, error) {
	live, err := p.Cluster.HostedCluster(ctx, obj.Name)
	if err != nil {
		return adapter.Outcome{}, kubeError(err)
	}
	if err := checkOwner(p, live, obj); err != nil {
		return failed(ReasonHostedClusterConflict, err), err
	}
	ref := p.Namespace + "/" + obj.Name
	mem := memoryOf(obj.LastReport)
	presence := presenceOf(live, mem, obj.Labels[LabelRecreate])
	if presence == presenceMissing || presence == presenceDeleting {
		out := missing(ref, presence, mem)
		out.RequeueAfter = r.progressInterval() // the watch wakes it when the object goes; a recreate label does not
		return out, nil
	}
	current := observe(live)
	now := r.now()
	plan := planFor(stream, rollout.Cluster{ID: obj.ID, Labels: obj.Labels, AcceptedRisks: deref(spec.AcceptedRisks),
		Installed: live != nil, Running: current.currentVersion()}, live, sched, now)
	pull, err := r.PullSecret()
	if err != nil {
		return adapter.Outcome{}, fmt.Errorf("read the pull secret: %w", err)
	}
	hostedCluster := spec.HostedCluster
	if hostedCluster == nil {
		hostedCluster = &api.HostedClusterSpec{}
	}
	roll, version := plan.Roll, plan.Version
	desired, err := Build(&Desired{ClusterID: obj.ID, Name: obj.Name, Namespace: p.Namespace, Generation: obj.Generation,
		Spec: *hostedCluster, ReleaseImage: roll.Image, ReleaseVersion: version, PullSecret: pull})
	if err != nil {
		return adapter.Outcome{}, adapter.Terminal(ReasonInvalidSpec, err)
	}
	writes, err := changes(ctx, p, desired, live)
	if err != nil {
		return failed(adapter.ErrorReason(err), err), err
	}
	// What the applier has (or had) for the cluster, reported even when this reconcile fails further on.
	kept := func(out adapter.Outcome) adapter.Outcome {
		if out.Data == nil {
			out.Data = map[string]any{}
		}
		if live != nil {
			out.Data[DataHostedClusterUID] = string(live.GetUID())
		}
		if token := obj.Labels[LabelRecreate]; token != "" && live != nil {
			// A request seen with a HostedCluster in place (made by this reconcile or there before) is spent: it
			// cannot ask for a later re-creation. One whose create failed is not: it is tried again.
			out.Data[DataRecreateToken] = token
		}
		return out
	}
	if r.Pacer != nil {
		if paced(writes) && reapplyIsPaced(live, desired.HostedCluster, roll, obj.Generation) {
			if wait := r.Pacer.Admit(obj.ID, now); wait > 0 {
				out := outcome(ref, plan, current)
				out.Conditions = append(out.Conditions, reapplyPaced(wait))
				out.RequeueAfter = wait
				return kept(out), nil
			}
		} else {
			r.Pacer.Forget(obj.ID) // applied at once (or not at all): a turn it held is no longer needed
		}
	}
	applied := live
	for _, w := range writes {
		stored, err := r.write(ctx, p, w, presence)
		if err != nil {
			err = kubeError(err)
			return kept(failed(adapter.ErrorReason(err), err)), err
		}
		if w.desired == desired.HostedCluster {
			applied = stored
			live = stored
		}
	}
	if err := r.pruneSecrets(ctx, p, obj.ID, desired, applied); err != nil {
		err = kubeError(err)
		return kept(failed(adapter.ErrorReason(err), err)), err
	}
	out := outcome(ref, plan, observe(applied))
	out.Conditions = append(out.Conditions, conditions.Reported{Type: ConditionReapplyPending, Status: conditions.False,
		Reason: ReasonApplied, Message: "what the applier builds for the cluster is applied"})
	switch {
	case roll.Waiting:
		out.RequeueAfter = max(time.Second, roll.NextOpen.Sub(now))
	case !settled(roll, observe(applied)):
		out.RequeueAfter = r.progressInterval()
	}
	return kept(out), nil
}

// write makes one object what the applier built: a create where there is none, else an apply over the object as
// read (see ManagementCluster). A drift set back is counted and logged.
func (r *Reconciler) write(ctx context.Context, p Placement, w write, presence presence) (*unstructured.Unstructured, error) {
	if w.live == nil {
		if presence == presenceRecreate && w.desired.GetKind() == kindHostedCluster {
			r.log().Warn("re-creating a HostedCluster that went missing, as the cluster's "+LabelRecreate+" label asks",
				slog.String("hosted_cluster", p.Namespace+"/"+w.desired.GetName()))
		}
		return p.Cluster.Create(ctx, w.desired)
	}
	stored, err := p.Cluster.Update(ctx, w.desired, w.live)
	if err == nil && len(w.drift) > 0 {
		r.Metrics.drifted(w.desired.GetKind())
		r.log().Info("drift from what the applier applied set back", slog.String("kind", w.desired.GetKind()),
			slog.String("name", p.Namespace+"/"+w.desired.GetName()), slog.Any("fields", w.drift))
	}
	return stored, err
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}

// pruneSecrets deletes the cluster's Secrets (labelled with its id) that neither the built objects nor the
// HostedCluster as stored name: those of an older naming, or of an SSH key no longer set. Each delete carries the
// Secret's UID.
func (r *Reconciler) pruneSecrets(ctx context.Context, p Placement, clusterID string, desired *Objects, applied *unstructured.Unstructured) error {
	keep := map[string]bool{}
	if applied != nil {
		keep[nestedString(applied.Object, "spec", "pullSecret", "name")] = true
		keep[nestedString(applied.Object, "spec", "sshKey", "name")] = true
	}
	for _, s := range desired.Secrets {
		keep[s.GetName()] = true
	}
	secrets, err := p.Cluster.Secrets(ctx, clusterID)
	if err != nil {
		return err
	}
	for _, s := range secrets {
		if keep[s.GetName()] || s.GetLabels()[LabelClusterID] != clusterID {
			continue
		}
		if err := p.Cluster.Delete(ctx, s); err != nil {
			return err
		}
		r.log().Info("a Secret the cluster no longer names deleted", slog.String("name", p.Namespace+"/"+s.GetName()))
	}
	return nil
}

// planFor decides what to apply: the verdict of the stream's rollout for the cluster (install, move where admitted,
// or stay), its image when it names one and the image the live HostedCluster runs otherwise, and then the cluster's
// UpgradeSchedule, which an admitted cluster still waits for. The version goes with the image applied.
func planFor(stream StreamRollout, c rollout.Cluster, live *unstructured.Unstructured, sched *schedule.Schedule, now time.Time) Plan {
	p := Plan{Verdict: rollout.ForCluster(stream.Report, &stream.Policy, c), TargetImage: stream.Report.ReleaseImage,
		TargetVersion: stream.Report.ResolvedVersion}
	image, version := p.Verdict.Image, p.Verdict.Version
	liveImage := observe(live).ReleaseImage
	if image == "" && liveImage != "" {
		image, version = liveImage, live.GetAnnotations()[AnnotationReleaseVersion]
	}
	if image == "" { // a HostedCluster without an image (not one this applier wrote): install what new clusters do
		version, image = stream.Report.Install()
	}
	p.Roll = decideRollout(liveImage, image, sched, now)
	p.Version = version
	if p.Roll.Image != image && live != nil {
		p.Version = live.GetAnnotations()[AnnotationReleaseVersion] // the version of the image it keeps running
	}
	return p
}

// write is one object to write: desired, over live as read (nil: to create). drift is set when the applied hash is
// unchanged but the object is not what was applied (a hand edit).
type write struct {
	desired, live *unstructured.Unstructured
	drift         []string
}

// paced reports whether writes hold a change of what the applier builds, which the pacer may hold back; setting a
// hand edit back is not held.
func paced(writes []write) bool {
	for _, w := range writes {
		if w.live == nil || len(w.drift) == 0 {
			return true
		}
	}
	return false
}

// changes returns, in the order to write them (the Secrets first, since the HostedCluster names them), the objects
// that differ from what was last applied (their applied-hash) or drifted from it (driftOf): the others need no
// write.
func changes(ctx context.Context, p Placement, desired *Objects, live *unstructured.Unstructured) ([]write, error) {
	var out []write
	for _, secret := range desired.Secrets {
		current, err := p.Cluster.Secret(ctx, secret.GetName())
		if err != nil {
			return nil, kubeError(err)
		}
		if current != nil && current.GetLabels()[LabelClusterID] != secret.GetLabels()[LabelClusterID] {
			return nil, adapter.Transient(ReasonHostedClusterConflict, fmt.Errorf("secret %s/%s exists and is not this cluster's (label %s=%q): "+
				"left alone", p.Namespace, secret.GetName(), LabelClusterID, current.GetLabels()[LabelClusterID]))
		}
		if w, ok := changeOf(secret, current); ok {
			out = append(out, w)
		}
	}
	if w, ok := changeOf(desired.HostedCluster, live); ok {
		out = append(out, w)
	}
	return out, nil
}

// changeOf says whether desired must be written over live, and how.
func changeOf(desired, live *unstructured.Unstructured) (write, bool) {
	if !sameHash(live, desired) {
		return write{desired: desired, live: live}, true
	}
	if drift := driftOf(live, desired); len(drift) > 0 {
		return write{desired: desired, live: live, drift: drift}, true
	}
	return write{}, false
}

// reapplyIsPaced reports whether a write to an existing HostedCluster (or its Secrets) is the applier's own doing
// and so must wait for the pacer: the cluster's hosted_cluster spec is the one last applied and the release image
// stays. A user's spec change rolls at once; a new release image is paced by the UpgradeSchedule instead. A
// HostedCluster written before the spec-hash annotation existed is judged by the cluster generation it was applied
// for, so an applier upgrade that adds the annotation is itself paced.
func reapplyIsPaced(live, desired *unstructured.Unstructured, roll Rollout, generation int64) bool {
	if live == nil || observe(live).ReleaseImage != roll.Image {
		return false
	}
	if spec, ok := live.GetAnnotations()[AnnotationSpecHash]; ok {
		return spec == desired.GetAnnotations()[AnnotationSpecHash]
	}
	return live.GetAnnotations()[AnnotationGeneration] == strconv.FormatInt(generation, 10)
}

// reapplyPaced is the condition of a cluster whose re-apply waits for its turn.
func reapplyPaced(wait time.Duration) conditions.Reported {
	return conditions.Reported{Type: ConditionReapplyPending, Status: conditions.True, Reason: ReasonReapplyPaced,
		Message: fmt.Sprintf("the applier's own change (a new version, pull secret or default) is re-applied to the fleet "+
			"at a bounded pace: this cluster's turn comes in %s", wait.Round(time.Millisecond))}
}

func sameHash(live, desired *unstructured.Unstructured) bool {
	return live != nil && live.GetAnnotations()[AnnotationAppliedHash] == desired.GetAnnotations()[AnnotationAppliedHash]
}

// checkOwner refuses to touch a HostedCluster that is not this cluster's: one labelled with another cluster's id,
// or with none (made by someone else). Such an object may go away (a cluster of that name being deleted), so it is
// retried with backoff rather than given up on.
func checkOwner(p Placement, live *unstructured.Unstructured, obj *adapter.Object) error {
	if live == nil {
		return nil
	}
	if owner := live.GetLabels()[LabelClusterID]; owner != obj.ID {
		return adapter.Transient(ReasonHostedClusterConflict, fmt.Errorf("HostedCluster %s/%s exists and is not this cluster's "+
			"(label %s=%q, this cluster is %s): left alone", p.Namespace, obj.Name, LabelClusterID, owner, obj.ID))
	}
	return nil
}

// Finalize deletes the cluster's HostedCluster and Secrets, and reports Finalized only once the HostedCluster is
// gone (HyperShift's finalizer has run).
func (r *Reconciler) Finalize(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	r.Pacer.Forget(obj.ID) // a cluster being deleted has no re-apply to wait for
	p, err := r.placements().Place(ctx, obj)
	if errors.Is(err, ErrNotPlaced) {
		// The applier writes only where the placer placed (and its own report would name that): never placed,
		// nothing was written.
		return adapter.Outcome{Available: conditions.Reported{Status: conditions.False, Reason: ReasonDeleted,
			Message: "never placed on a management cluster: nothing to delete"}, Finalized: true}, nil
	}
	if err != nil {
		return r.unplaced(p, err)
	}
	// A stale cache could show the HostedCluster gone while it is not: the cluster would be finalized too soon.
	if err := fresh(p); err != nil {
		return r.unplaced(p, err)
	}
	out, err := r.remove(ctx, obj, p)
	if out.Finalized {
		r.placements().Forget(obj.ID)
	}
	if p.Name != "" && !out.Finalized {
		if out.Data == nil {
			out.Data = map[string]any{}
		}
		out.Data[DataManagementCluster] = p.Name
	}
	return out, err
}

// remove is Finalize on the management cluster p. Each delete carries the UID of the object that was checked to be
// the cluster's, so that an object made in its place a moment later is not deleted instead.
func (r *Reconciler) remove(ctx context.Context, obj *adapter.Object, p Placement) (adapter.Outcome, error) {
	live, err := p.Cluster.HostedCluster(ctx, obj.Name)
	if err != nil {
		return adapter.Outcome{}, kubeError(err)
	}
	ref := p.Namespace + "/" + obj.Name
	if live != nil && live.GetLabels()[LabelClusterID] != obj.ID {
		live = nil // someone else's: not ours to delete
	}
	if live != nil {
		if live.GetDeletionTimestamp() == nil {
			if err := p.Cluster.Delete(ctx, live); err != nil {
				return adapter.Outcome{}, kubeError(err)
			}
		}
		return adapter.Outcome{
			Available:    conditions.Reported{Status: conditions.False, Reason: ReasonHostedClusterDeleting, Message: "deleting " + ref},
			Data:         map[string]any{DataHostedCluster: ref},
			RequeueAfter: r.progressInterval(),
		}, nil
	}
	// Every Secret labelled with the cluster's id, whatever it was named by: the pull secret and SSH key of each
	// naming the applier has used.
	secrets, err := p.Cluster.Secrets(ctx, obj.ID)
	if err != nil {
		return adapter.Outcome{}, kubeError(err)
	}
	for _, secret := range secrets {
		if secret.GetLabels()[LabelClusterID] != obj.ID {
			continue
		}
		if err := p.Cluster.Delete(ctx, secret); err != nil {
			return adapter.Outcome{}, kubeError(err)
		}
	}
	return adapter.Outcome{
		Available: conditions.Reported{Status: conditions.False, Reason: ReasonDeleted, Message: ref + " is gone"},
		Finalized: true,
	}, nil
}

// unplaced is the outcome of a cluster whose management cluster cannot be used (see placementOutcome): not placed
// yet is no error, only a wait; the others are retried with backoff, and a member that becomes reachable again
// wakes its clusters at once.
func (r *Reconciler) unplaced(p Placement, err error) (adapter.Outcome, error) {
	out := placementOutcome(p.Name, err)
	if errors.Is(err, ErrNotPlaced) {
		out.RequeueAfter = r.placementRetry()
		return out, nil
	}
	return out, adapter.Transient(out.Available.Reason, err)
}

// failed is the outcome of a reconcile that could not apply: Available False with the reason.
func failed(reason string, err error) adapter.Outcome {
	return adapter.Outcome{Available: conditions.Reported{Status: conditions.False, Reason: reason, Message: err.Error()}}
}

// kubeError classifies an error of the management cluster: what it refuses as invalid (422) cannot succeed until
// the cluster's spec changes; everything else (conflicts, timeouts, 5xx, 429, a forbidden that RBAC may still fix,
// an unreachable server) is retried with backoff.
func kubeError(err error) error {
	switch {
	case errors.Is(err, ErrExists), errors.Is(err, ErrChanged):
		return adapter.Transient(ReasonConcurrentChange, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return adapter.Terminal(ReasonHostedClusterInvalid, err)
	default:
		return adapter.Transient(ReasonManagementCluster, err)
	}
}
