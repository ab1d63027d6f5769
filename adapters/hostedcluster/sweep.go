package hostedcluster

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// Defaults of the orphan sweep.
const (
	// DefaultSweepGrace is how long HostedClusters and Secrets labelled for a cluster the API does not know are
	// left alone before they are deleted: long enough to notice a cluster force-deleted by mistake, or an applier
	// pointed at the wrong API.
	DefaultSweepGrace = 10 * time.Minute
	// DefaultSweepInterval is how often the sweep looks: a read of the watch caches, and one list of the
	// clusters' ids from the API (a request per 500 clusters) plus a GET of each cluster the list lacks.
	DefaultSweepInterval = time.Minute
)

// sweepTarget is one management cluster the sweep looks at.
type sweepTarget struct {
	name string // the ManagementCluster's; empty for the one of --kubeconfig
	kube *kubeCluster
}

// sweeper deletes the HostedClusters and Secrets labelled with the id of a cluster the API answers 404 for, once
// the grace period has passed (adapter.Orphans): a force-delete skips the applier's finalizer by design, and what
// it leaves would otherwise stay forever. Each delete carries the object's UID. A cluster's Secrets go once no
// HostedCluster of it is left, since HyperShift may read them while it tears the control plane down. A dry run only
// lists (logs and counts, once each) what it would delete. Only its run goroutine touches its state.
type sweeper struct {
	targets func() []sweepTarget
	orphans *adapter.Orphans
	// mine says whether a cluster id is this replica's (its shard), so that one replica sweeps each.
	mine    func(clusterID string) bool
	dryRun  bool
	grace   time.Duration // the orphans' (for the log)
	every   time.Duration
	metrics *Metrics
	log     *slog.Logger
	// acted holds the objects deleted (or, in a dry run, listed) that the caches still show: the cache may show a
	// deleted object for a moment, and a second delete of it would count it twice.
	acted map[types.UID]bool
}

// run sweeps every interval until ctx ends.
func (s *sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.sweep(ctx, time.Now())
	}
}

// owned is what one management cluster holds of the clusters in this replica's shard.
type owned struct {
	target       sweepTarget
	hcs, secrets map[string][]*unstructured.Unstructured // by cluster id
}

// sweep is one round.
func (s *sweeper) sweep(ctx context.Context, now time.Time) {
	var (
		all   []owned
		named []adapter.Named
		seen  = map[string]bool{}
	)
	for _, t := range s.targets() {
		hcs, secrets, ok, err := t.kube.owned()
		if err != nil || !ok { // not listed yet: nothing can be told about it this round
			if err != nil {
				s.log.Info("orphan sweep: cannot read the caches", slog.String("management_cluster", t.name), slog.Any("error", err))
			}
			continue
		}
		o := owned{target: t, hcs: s.byCluster(hcs), secrets: s.byCluster(secrets)}
		for _, m := range []map[string][]*unstructured.Unstructured{o.hcs, o.secrets} {
			for id := range m {
				if !seen[id] {
					seen[id] = true
					named = append(named, adapter.Named{ID: id})
				}
			}
		}
		all = append(all, o)
	}
	present := map[types.UID]bool{}
	for _, o := range all {
		for _, m := range []map[string][]*unstructured.Unstructured{o.hcs, o.secrets} {
			for _, objs := range m {
				for _, obj := range objs {
					present[obj.GetUID()] = true
				}
			}
		}
	}
	for uid := range s.acted {
		if !present[uid] {
			delete(s.acted, uid)
		}
	}
	check, err := s.orphans.Check(ctx, named, now)
	if err != nil {
		s.log.Info("orphan sweep: the API did not answer for every cluster", slog.Any("error", err))
	}
	counts := map[string]int{kindHostedCluster: 0, "Secret": 0}
	for _, o := range all {
		for id := range check.Since {
			counts[kindHostedCluster] += len(o.hcs[id])
			counts["Secret"] += len(o.secrets[id])
		}
	}
	if s.metrics != nil {
		for kind, n := range counts {
			s.metrics.orphans.WithLabelValues(kind).Set(float64(n))
		}
	}
	for _, id := range check.Found {
		s.log.Warn("HostedClusters and Secrets labelled for a cluster the API does not know: deleted after the grace period unless it reappears",
			slog.String("cluster_id", id), slog.Time("sweep_after", check.Since[id].Add(s.grace)), slog.Bool("dry_run", s.dryRun))
	}
	for _, id := range check.Due {
		for _, o := range all {
			for _, hc := range o.hcs[id] {
				s.remove(ctx, o.target, id, hc, check.Since[id])
			}
			if len(o.hcs[id]) > 0 && !s.dryRun {
				continue // the Secrets go once the HostedCluster has (a dry run lists them at once)
			}
			for _, secret := range o.secrets[id] {
				s.remove(ctx, o.target, id, secret, check.Since[id])
			}
		}
	}
}

// byCluster groups objects by their cluster-id label, keeping those of this replica's shard.
func (s *sweeper) byCluster(objs []*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	out := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		if id := o.GetLabels()[LabelClusterID]; id != "" && s.mine(id) {
			out[id] = append(out[id], o)
		}
	}
	return out
}

// remove deletes obj (or lists it, in a dry run).
func (s *sweeper) remove(ctx context.Context, t sweepTarget, clusterID string, obj *unstructured.Unstructured, since time.Time) {
	attrs := []any{slog.String("kind", obj.GetKind()), slog.String("name", obj.GetNamespace()+"/"+obj.GetName()),
		slog.String("uid", string(obj.GetUID())), slog.String("cluster_id", clusterID), slog.Time("orphaned_since", since)}
	if t.name != "" {
		attrs = append(attrs, slog.String("management_cluster", t.name))
	}
	if s.acted[obj.GetUID()] {
		return
	}
	if s.dryRun {
		s.acted[obj.GetUID()] = true
		if s.metrics != nil {
			s.metrics.wouldSweep.WithLabelValues(obj.GetKind()).Inc()
		}
		s.log.Warn("orphaned object would be deleted (--sweep-dry-run)", attrs...)
		return
	}
	if obj.GetDeletionTimestamp() != nil {
		return // deleted already; its finalizers are running
	}
	err := t.kube.Delete(ctx, obj)
	switch {
	case errors.Is(err, ErrChanged):
		s.log.Info("orphaned object replaced since it was read: left alone", attrs...)
	case err != nil:
		s.log.Info("orphaned object not deleted; tried again next round", append(attrs, slog.Any("error", err))...)
	default:
		s.acted[obj.GetUID()] = true
		if s.metrics != nil {
			s.metrics.swept.WithLabelValues(obj.GetKind()).Inc()
		}
		s.log.Warn("orphaned object deleted", attrs...)
	}
}
