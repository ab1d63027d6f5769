package hostedcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/capacity"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// DefaultManagementClusterResync is how often the applier reports on each ManagementCluster: its count of hosted
// clusters is what the placer places by, so it must stay fresh.
const DefaultManagementClusterResync = 10 * time.Second

// Each placed control plane's share of a management cluster's vCPU and memory budgets by default: HyperShift's
// sizing guide for a highly available hosted control plane (and the placer's defaults).
const (
	DefaultControlPlaneVCPU      = capacity.DefaultControlPlaneVCPU
	DefaultControlPlaneMemoryGiB = capacity.DefaultControlPlaneMemoryGiB
)

// managementClusters is the applier's reconciler of ManagementClusters: it keeps the fleet's member of each up to
// date (a rotated kubeconfig, a changed namespace) and reports whether it can be used, and how full it is.
type managementClusters struct {
	fleet  *fleet
	resync time.Duration
	// perControlPlane is what each hosted cluster counts against the vCPU and memory budgets.
	perControlPlane capacity.ControlPlane
}

var _ adapter.Reconciler = (*managementClusters)(nil)

// Reconcile (re)builds the member from the credentials as they are now, probes it and reports.
func (r *managementClusters) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	s, err := mcSpecOf(obj)
	if err != nil {
		return failed(ReasonInvalidSpec, err), adapter.Terminal(ReasonInvalidSpec, err)
	}
	r.fleet.observe(s)
	obs := mcObservation{}
	m, err := r.fleet.ensure(ctx, s)
	switch {
	case errors.Is(err, errStopping):
		return adapter.Outcome{}, err
	case err != nil:
		obs.credentials = err
	default:
		st, flipped := m.probe(ctx)
		r.fleet.probed(m, flipped)
		obs.probe, obs.fresh = st, m.kube.Fresh()
		if st.reachable && st.hyperShift {
			// A new member's caches list first; the count is read from them, so wait for them a little.
			syncCtx, cancel := context.WithTimeout(ctx, m.timeout)
			obs.synced = m.kube.waitSynced(syncCtx)
			cancel()
			if obs.synced {
				if obs.hosted, err = m.kube.hosted(); err != nil {
					return adapter.Outcome{}, err
				}
			}
		}
	}
	out := mcOutcome(s.spec.Capacity, r.perControlPlane, obs)
	out.RequeueAfter = r.resync
	return out, nil
}

// Finalize drops the member: its caches stop and its client goes.
func (r *managementClusters) Finalize(_ context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	r.fleet.drop(obj.Name)
	return adapter.Outcome{
		Available: conditions.Reported{Status: conditions.False, Reason: ReasonDeleted, Message: "the applier no longer serves " + obj.Name},
		Finalized: true,
	}, nil
}

// mcObservation is what the applier found of a management cluster.
type mcObservation struct {
	credentials error // ErrCredentialsNotFound or ErrCredentialsInvalid: no member could be built
	probe       probeResult
	synced      bool // the caches have listed its namespace
	hosted      int  // when synced
	fresh       error
}

// stale returns why the applier's caches of the management cluster do not follow it, or nil.
func (o mcObservation) stale() error {
	if o.probe.listErr != nil {
		return o.probe.listErr
	}
	return o.fresh
}

// mcOutcome is the report on a management cluster: Reachable, HyperShiftInstalled, Available and the capacity
// data the placer places by. It is pure.
func mcOutcome(budget api.ManagementClusterCapacity, cp capacity.ControlPlane, o mcObservation) adapter.Outcome {
	out := adapter.Outcome{Data: map[string]any{DataMaxHostedClusters: budget.MaxHostedClusters}}
	unknown := func(typ, reason, message string) conditions.Reported {
		return conditions.Reported{Type: typ, Status: conditions.Unknown, Reason: reason, Message: message}
	}
	switch {
	case o.credentials != nil:
		reason := ReasonCredentialsInvalid
		if errors.Is(o.credentials, ErrCredentialsNotFound) {
			reason = ReasonCredentialsNotFound
		}
		out.Available = conditions.Reported{Status: conditions.False, Reason: reason, Message: o.credentials.Error()}
		out.Conditions = []conditions.Reported{unknown(ConditionReachable, reason, "no client without credentials"),
			unknown(ConditionHyperShiftInstalled, reason, "no client without credentials")}
		return out
	case !o.probe.reachable:
		cause := "no answer"
		if o.probe.err != nil {
			cause = o.probe.err.Error()
		}
		out.Available = conditions.Reported{Status: conditions.False, Reason: ReasonUnreachable, Message: cause}
		out.Conditions = []conditions.Reported{
			{Type: ConditionReachable, Status: conditions.False, Reason: ReasonUnreachable, Message: cause},
			unknown(ConditionHyperShiftInstalled, ReasonUnreachable, "its kube-apiserver does not answer"),
		}
		return out
	}
	out.Data[DataKubernetesVersion] = o.probe.version
	out.Conditions = []conditions.Reported{{Type: ConditionReachable, Status: conditions.True, Reason: ReasonReachable,
		Message: "kube-apiserver " + o.probe.version}}
	gv := hostedClustersGVR.GroupVersion().String()
	if !o.probe.hyperShift {
		msg := gv + " does not serve " + hostedClustersGVR.Resource + ": install HyperShift"
		out.Available = conditions.Reported{Status: conditions.False, Reason: ReasonHyperShiftNotInstalled, Message: msg}
		out.Conditions = append(out.Conditions, conditions.Reported{Type: ConditionHyperShiftInstalled, Status: conditions.False,
			Reason: ReasonHyperShiftNotInstalled, Message: msg})
		return out
	}
	out.Conditions = append(out.Conditions, conditions.Reported{Type: ConditionHyperShiftInstalled, Status: conditions.True,
		Reason: ReasonHyperShiftInstalled, Message: gv + " serves " + hostedClustersGVR.Resource})
	if err := o.stale(); err != nil {
		out.Available = conditions.Reported{Status: conditions.False, Reason: ReasonCacheStale, Message: err.Error()}
		return out
	}
	if !o.synced {
		out.Available = conditions.Reported{Status: conditions.False, Reason: ReasonSyncing,
			Message: "the watch of its HostedClusters has not listed them yet"}
		return out
	}
	out.Data[DataHostedClusters] = o.hosted
	out.Data[DataCapacityUsed] = capacity.BudgetOf(budget).Used(o.hosted, cp)
	out.Available = conditions.Reported{Status: conditions.True, Reason: ReasonServing,
		Message: fmt.Sprintf("%d/%d hosted clusters", o.hosted, budget.MaxHostedClusters)}
	return out
}

// placementOutcome is the report of a cluster whose management cluster cannot be used: waiting for the placer,
// unreachable (Unknown: what HyperShift does there cannot be seen), or not usable at all. It is pure.
func placementOutcome(name string, err error) adapter.Outcome {
	out := adapter.Outcome{Available: conditions.Reported{Status: conditions.False, Reason: placementReason(err), Message: err.Error()}}
	if errors.Is(err, ErrManagementClusterUnreachable) || errors.Is(err, ErrCacheStale) {
		out.Available.Status = conditions.Unknown
	}
	if name != "" {
		out.Data = map[string]any{DataManagementCluster: name}
	}
	return out
}

// placementReason is the reason of a Placements error.
func placementReason(err error) string {
	switch {
	case errors.Is(err, ErrNotPlaced):
		return ReasonWaitingForPlacement
	case errors.Is(err, ErrManagementClusterUnreachable):
		return ReasonManagementClusterUnreachable
	case errors.Is(err, ErrCacheStale):
		return ReasonCacheStale
	case errors.Is(err, ErrManagementClusterNotFound):
		return ReasonManagementClusterNotFound
	case errors.Is(err, ErrCredentialsNotFound):
		return ReasonCredentialsNotFound
	case errors.Is(err, ErrCredentialsInvalid):
		return ReasonCredentialsInvalid
	}
	return ReasonManagementCluster
}
