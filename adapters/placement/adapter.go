package placement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/capacity"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Name is the adapter name the placer reports under.
const Name = "cluster-placer"

// DefaultApplier is the adapter that reports on management clusters and applies the clusters placed on them.
const DefaultApplier = "hostedcluster-applier"

// Defaults of the placer's settings. A highly available hosted control plane requests about 5 vCPU and 18 GiB
// (HyperShift's sizing guide).
const (
	DefaultControlPlaneVCPU      = capacity.DefaultControlPlaneVCPU
	DefaultControlPlaneMemoryGiB = capacity.DefaultControlPlaneMemoryGiB
	DefaultRetryInterval         = 3 * time.Second
	DefaultFinalizeInterval      = 2 * time.Second
	DefaultPruneInterval         = 5 * time.Minute
)

// Options are the placer's own settings, beside the runtime's.
type Options struct {
	// ControlPlaneVCPU and ControlPlaneMemoryGiB are what each placed cluster counts against a management
	// cluster's vcpu and memory_gib budgets.
	ControlPlaneVCPU, ControlPlaneMemoryGiB int
	// RetryInterval is how soon a cluster that no management cluster takes is tried again.
	RetryInterval time.Duration
	// FinalizeInterval is how soon a deleting cluster whose HostedCluster is not gone yet is looked at again.
	FinalizeInterval time.Duration
	// PruneInterval is how often the ledger drops the placements of clusters the API no longer has.
	PruneInterval time.Duration
	// Applier is the adapter whose reports say whether a management cluster is reachable and when a deleted
	// cluster's HostedCluster is gone.
	Applier string
}

// DefaultOptions are the placer's defaults.
func DefaultOptions() Options {
	return Options{ControlPlaneVCPU: DefaultControlPlaneVCPU, ControlPlaneMemoryGiB: DefaultControlPlaneMemoryGiB,
		RetryInterval: DefaultRetryInterval, FinalizeInterval: DefaultFinalizeInterval, PruneInterval: DefaultPruneInterval,
		Applier: DefaultApplier}
}

// AddFlags binds the options, with o's values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.ControlPlaneVCPU, "control-plane-vcpu", o.ControlPlaneVCPU, "vCPU each placed hosted control plane counts against a management cluster's capacity.vcpu")
	fs.IntVar(&o.ControlPlaneMemoryGiB, "control-plane-memory-gib", o.ControlPlaneMemoryGiB, "GiB each placed hosted control plane counts against a management cluster's capacity.memory_gib")
	fs.DurationVar(&o.RetryInterval, "retry-interval", o.RetryInterval, "how soon a cluster no management cluster takes is tried again")
	fs.DurationVar(&o.FinalizeInterval, "finalize-interval", o.FinalizeInterval, "how soon a deleted cluster whose HostedCluster is not gone yet is looked at again")
	fs.DurationVar(&o.PruneInterval, "prune-interval", o.PruneInterval, "how often placements of clusters the API no longer has (force-deleted) are dropped")
	fs.StringVar(&o.Applier, "applier-adapter", o.Applier, "the adapter that reports on management clusters and applies the clusters placed on them")
}

// check returns every option that cannot work, in one error.
func (o *Options) check() error {
	var errs []error
	if o.ControlPlaneVCPU < 1 || o.ControlPlaneMemoryGiB < 1 {
		errs = append(errs, errors.New("--control-plane-vcpu and --control-plane-memory-gib must be at least 1"))
	}
	if o.RetryInterval <= 0 || o.FinalizeInterval <= 0 || o.PruneInterval <= 0 {
		errs = append(errs, errors.New("--retry-interval, --finalize-interval and --prune-interval must be positive"))
	}
	if !conditions.ValidAdapterName(o.Applier) {
		errs = append(errs, fmt.Errorf("--applier-adapter %q is not an adapter name", o.Applier))
	}
	return errors.Join(errs...)
}

// Adapter is the placer on the shared runtime.
type Adapter struct {
	*adapter.Runner
	reconciler *Reconciler
	prune      time.Duration
	log        *slog.Logger
}

// New wires the placer. It refuses more than one shard: placements are decided by one process against one
// ledger, which is what keeps two clusters created at once from taking the same last slot.
func New(rt adapter.Config, o Options, log *slog.Logger) (*Adapter, error) {
	if rt.ShardCount > 1 {
		return nil, fmt.Errorf("--shard-count %d: %s decides every placement against one ledger and runs as one replica "+
			"(docs/management-clusters.md); run it with --shard-count 1", rt.ShardCount, rt.Adapter)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	runner, err := adapter.New(rt, log)
	if err != nil {
		return nil, err
	}
	log = log.With(slog.String("adapter", rt.Adapter))
	clusters := adapter.Clusters()
	rec := &Reconciler{API: runner.API(), Adapter: rt.Adapter, Applier: o.Applier,
		ControlPlane:  ControlPlane{VCPU: o.ControlPlaneVCPU, MemoryGiB: o.ControlPlaneMemoryGiB},
		RetryInterval: o.RetryInterval, FinalizeInterval: o.FinalizeInterval, Log: log,
		Wake: func(id string) { runner.Wake(clusters, "", id) }}
	if err := rec.Check(); err != nil {
		return nil, err
	}
	if err := runner.Registerer().Register(newPlacedCollector(rec)); err != nil {
		return nil, fmt.Errorf("register the placer's metrics: %w", err)
	}
	return &Adapter{Runner: runner, reconciler: rec, prune: o.PruneInterval, log: log}, nil
}

// Run places clusters until ctx ends (see adapter.Runner.Run). Beside the runtime it rebuilds the ledger at once,
// which wakes the clusters left unplaced before a restart, and prunes it every --prune-interval.
func (a *Adapter) Run(ctx context.Context) error {
	keepCtx, stop := context.WithCancel(ctx)
	var keeper sync.WaitGroup
	keeper.Go(func() { a.keep(keepCtx) })
	err := a.Runner.Run(ctx, adapter.Controller{Kind: adapter.Clusters(), Reconciler: a.reconciler})
	stop()
	keeper.Wait()
	return err
}

// keep builds the ledger (retrying until it can) and then prunes it every interval, until ctx ends.
func (a *Adapter) keep(ctx context.Context) {
	retry := time.NewTicker(a.reconciler.RetryInterval)
	defer retry.Stop()
	for {
		err := a.reconciler.EnsureLedger(ctx)
		if err == nil {
			break
		}
		a.log.Warn("cannot rebuild the placements yet; will retry", slog.Any("error", err))
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		}
	}
	prune := time.NewTicker(a.prune)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
		}
		n, err := a.reconciler.Prune(ctx)
		switch {
		case err != nil:
			a.log.Warn("cannot prune the placements; will retry", slog.Any("error", err))
		case n > 0:
			a.log.Info("dropped the placements of clusters removed without being finalized", slog.Int("dropped", n))
		}
	}
}

// placedCollector serves the ledger's count of clusters per management cluster, read at each scrape: the ledger is
// what decisions count, so it is what an operator compares with the applier's hosted_clusters.
type placedCollector struct {
	rec  *Reconciler
	desc *prometheus.Desc
}

func newPlacedCollector(rec *Reconciler) *placedCollector {
	return &placedCollector{rec: rec, desc: prometheus.NewDesc("hyperfleet_placer_placed_clusters",
		"Clusters the placer holds a slot for on each management cluster, deleting ones included.",
		[]string{"management_cluster"}, nil)}
}

func (c *placedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *placedCollector) Collect(ch chan<- prometheus.Metric) {
	for mc, n := range c.rec.Placed() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), mc)
	}
}
