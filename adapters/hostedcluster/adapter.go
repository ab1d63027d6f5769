package hostedcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/capacity"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// Options are the applier's own settings, beside the runtime's.
type Options struct {
	// Namespace holds the HostedClusters and their Secrets on the management cluster.
	Namespace string
	// PullSecretFile is the pull secret (a .dockerconfigjson) written into each cluster's pull-secret Secret; it is
	// read again when it changes.
	PullSecretFile string
	// ProgressInterval is how soon a cluster HyperShift is working on is looked at again if no watch event comes.
	ProgressInterval time.Duration
	// SyncTimeout bounds the first listing of the management cluster's HostedClusters and Secrets.
	SyncTimeout time.Duration
	// ReapplyRate and ReapplyBurst pace the re-applies no spec change asked for (a new applier version, pull secret
	// or default): at most ReapplyRate clusters a second after a burst of ReapplyBurst, across the process. Zero is
	// the default (DefaultReapplyRate, DefaultReapplyBurst).
	ReapplyRate  float64
	ReapplyBurst int

	// CredentialsDir holds a kubeconfig file per management cluster, named by each ManagementCluster's
	// spec.credentials.kubeconfig: set, the applier serves every ManagementCluster (NewFleet) and Namespace is
	// unused (each names its own).
	CredentialsDir string
	// KubeQPS and KubeBurst are each management cluster client's rate budget, in either mode; zero is
	// DefaultKubeQPS, DefaultKubeBurst.
	KubeQPS   float32
	KubeBurst int
	// ProbeInterval is how often each management cluster is probed (its version and HyperShift's API), and
	// ProbeTimeout how long a probe may take; a management cluster that fails it is not used until one succeeds.
	// Zero is DefaultProbeInterval, DefaultProbeTimeout.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// PlacementRetry is how soon a cluster the placer has not placed yet is looked at again; zero is
	// DefaultPlacementRetry.
	PlacementRetry time.Duration
	// ManagementClusterResync is how often each ManagementCluster is reported on; zero is
	// DefaultManagementClusterResync.
	ManagementClusterResync time.Duration
	// ControlPlaneVCPU and ControlPlaneMemoryGiB are what each hosted cluster counts against a ManagementCluster's
	// vCPU and memory budgets in its capacity_used (the placer's flags of the same names); zero is the default.
	ControlPlaneVCPU      int
	ControlPlaneMemoryGiB int
	// SweepGrace is how long HostedClusters and Secrets labelled for a cluster the API answers 404 for are left
	// alone before the orphan sweep deletes them, counted from when this replica first saw the 404; SweepInterval is
	// how often it looks; SweepDryRun only lists (logs and counts) what it would delete. Zero is DefaultSweepGrace,
	// DefaultSweepInterval.
	SweepGrace    time.Duration
	SweepInterval time.Duration
	SweepDryRun   bool
}

// managementClusterSpecTTL is how long a replica trusts the ManagementCluster spec it read (for a member's
// credentials name and namespace) before a probe tick reads it again: a replica that does not reconcile the
// ManagementCluster (another shard's) learns of a changed or deleted one within it, at one read a minute each.
const managementClusterSpecTTL = time.Minute

// DefaultKubeQPS and DefaultKubeBurst are each management cluster client's budget. client-go's own (5/s, burst 10)
// kept a fleet's clusters waiting minutes for their HostedClusters, and cluster-api's --kube-api-qps default (20/s,
// burst 30) is sized for one controller's handful of objects. Reads come from the watch caches, so the budget is
// spent on writes: about three per new cluster (its HostedCluster and two Secrets, server-side applied) and as many
// per deletion. 50/s takes a burst of 1,000 new clusters onto one management cluster in a minute, the fleet's
// target; a burst of 100 applies a batch of creates at once. Both are a small share of what a kube-apiserver admits
// (API Priority and Fairness shares hundreds of concurrent requests), and each management cluster has its own.
const (
	DefaultKubeQPS   = 50
	DefaultKubeBurst = 100
)

// Defaults of the many-management-clusters mode.
const (
	DefaultProbeInterval = 5 * time.Second
	DefaultProbeTimeout  = 3 * time.Second
)

// DefaultOptions are the applier's defaults: HyperShift's conventional "clusters" namespace.
func DefaultOptions() Options {
	return Options{Namespace: "clusters", ProgressInterval: DefaultProgressInterval, SyncTimeout: 2 * time.Minute,
		ReapplyRate: DefaultReapplyRate, ReapplyBurst: DefaultReapplyBurst, KubeQPS: DefaultKubeQPS, KubeBurst: DefaultKubeBurst,
		ProbeInterval: DefaultProbeInterval, ProbeTimeout: DefaultProbeTimeout, PlacementRetry: DefaultPlacementRetry,
		ManagementClusterResync: DefaultManagementClusterResync, ControlPlaneVCPU: DefaultControlPlaneVCPU,
		ControlPlaneMemoryGiB: DefaultControlPlaneMemoryGiB, SweepGrace: DefaultSweepGrace, SweepInterval: DefaultSweepInterval}
}

// DefaultResyncAfter is how often a settled cluster is looked at again: its HostedCluster is read from the watch
// cache, so a re-check costs the management cluster nothing and the API one read and one report.
const DefaultResyncAfter = 10 * time.Minute

// AddFlags binds the options, with o's values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the HostedClusters and their Secrets on the management cluster")
	fs.StringVar(&o.PullSecretFile, "pull-secret-file", o.PullSecretFile, "pull secret (.dockerconfigjson) written into each cluster's pull-secret Secret; re-read when it changes")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", o.ProgressInterval, "how soon a cluster HyperShift is working on is looked at again if no watch event comes")
	fs.DurationVar(&o.SyncTimeout, "sync-timeout", o.SyncTimeout, "longest the first listing of the management cluster may take")
	fs.Float64Var(&o.ReapplyRate, "reapply-rate", o.ReapplyRate, "clusters a second re-applied when the applier's own output changes from an unchanged spec (new version, pull secret, default); spec changes are not paced")
	fs.IntVar(&o.ReapplyBurst, "reapply-burst", o.ReapplyBurst, "clusters re-applied at once before --reapply-rate paces them")
	fs.StringVar(&o.CredentialsDir, "management-cluster-credentials", o.CredentialsDir, "directory of kubeconfig files, one per ManagementCluster (named by its spec.credentials.kubeconfig): serve them all, each cluster on the one the cluster-placer chose (instead of --kubeconfig)")
	fs.Float32Var(&o.KubeQPS, "kube-api-qps", o.KubeQPS, "requests a second of each management cluster's client (its watches and probe aside)")
	fs.IntVar(&o.KubeBurst, "kube-api-burst", o.KubeBurst, "requests each management cluster's client may send at once before --kube-api-qps paces it")
	// The names before cluster-api's, kept for the deployments that set them: hidden, and warned about when used
	// (what pflag's MarkDeprecated sets, without its error for a flag that does not exist).
	fs.Float32Var(&o.KubeQPS, "kube-qps", o.KubeQPS, "")
	fs.IntVar(&o.KubeBurst, "kube-burst", o.KubeBurst, "")
	for old, name := range map[string]string{"kube-qps": "kube-api-qps", "kube-burst": "kube-api-burst"} {
		f := fs.Lookup(old)
		f.Deprecated, f.Hidden = "use --"+name, true
	}
	fs.DurationVar(&o.ProbeInterval, "probe-interval", o.ProbeInterval, "how often each management cluster is probed; one that does not answer is not used, and its clusters report ManagementClusterUnreachable")
	fs.DurationVar(&o.ProbeTimeout, "probe-timeout", o.ProbeTimeout, "longest a management cluster's probe may take")
	fs.DurationVar(&o.PlacementRetry, "placement-retry", o.PlacementRetry, "how soon a cluster the cluster-placer has not placed yet is looked at again")
	fs.DurationVar(&o.ManagementClusterResync, "management-cluster-resync", o.ManagementClusterResync, "how often each ManagementCluster's reachability and hosted clusters are reported")
	fs.IntVar(&o.ControlPlaneVCPU, "control-plane-vcpu", o.ControlPlaneVCPU, "vCPU each hosted cluster counts against a ManagementCluster's vCPU budget in its capacity_used (as the placer's)")
	fs.IntVar(&o.ControlPlaneMemoryGiB, "control-plane-memory-gib", o.ControlPlaneMemoryGiB, "memory (GiB) each hosted cluster counts against a ManagementCluster's memory budget in its capacity_used (as the placer's)")
	fs.DurationVar(&o.SweepGrace, "sweep-grace", o.SweepGrace, "how long HostedClusters and Secrets labelled for a cluster the API does not know (404: force-deleted) are left alone before they are deleted (from when this replica first saw the 404)")
	fs.DurationVar(&o.SweepInterval, "sweep-interval", o.SweepInterval, "how often the orphan sweep looks for HostedClusters and Secrets of clusters the API does not know")
	fs.BoolVar(&o.SweepDryRun, "sweep-dry-run", o.SweepDryRun, "only list (log and count) the orphaned HostedClusters and Secrets the sweep would delete")
}

// Adapter is the applier on the shared runtime.
type Adapter struct {
	*adapter.Runner
	reconciler *Reconciler
	// kube is the one management cluster of New; nil for NewFleet's.
	kube     *kubeCluster
	syncWait time.Duration
	// fleet and managementClusters are NewFleet's management clusters and their reconciler; nil for New's.
	fleet              *fleet
	managementClusters *managementClusters
	sweeper            *sweeper
}

// New wires the applier to the management cluster that kube reaches: its watch caches, whose events wake the
// clusters HyperShift changes, the reconciler, and the runner with the clusters' VersionStreams and UpgradeSchedules
// as dependents (a re-resolved image or a changed schedule re-queues the clusters that name it at once).
func New(rt adapter.Config, o Options, kube *rest.Config, log *slog.Logger) (*Adapter, error) {
	if o.Namespace == "" {
		return nil, errors.New("--namespace is required")
	}
	runner, rec, err := newBase(rt, &o, log)
	if err != nil {
		return nil, err
	}
	cfg := kubeClientConfig(kube, o.KubeQPS, o.KubeBurst, func(rt http.RoundTripper) http.RoundTripper {
		return runner.ExternalTransport("kubernetes", rt)
	})
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("management cluster client: %w", err)
	}
	clusters := adapter.Clusters()
	mgmt, err := newKubeCluster(client, o.Namespace, func(id string) { runner.Wake(clusters, "", id) }, log)
	if err != nil {
		return nil, err
	}
	rec.Cluster, rec.Namespace = mgmt, o.Namespace
	if err := rec.Check(); err != nil {
		return nil, err
	}
	runner.AddReadinessCheck("management cluster cache", mgmt.Fresh)
	sw, err := newSweeper(o, runner, rec.Metrics, func() []sweepTarget { return []sweepTarget{{kube: mgmt}} }, log)
	if err != nil {
		return nil, err
	}
	return &Adapter{Runner: runner, reconciler: rec, kube: mgmt, syncWait: o.SyncTimeout, sweeper: sw}, nil
}

// NewFleet wires the applier to every ManagementCluster (o.CredentialsDir is required): each cluster is applied on
// the management cluster the cluster-placer's report names, through a member built from the kubeconfig in
// o.CredentialsDir that its ManagementCluster names, when first needed. A second controller reconciles the
// ManagementClusters: it rebuilds a member whose credentials or namespace changed, drops the member of one being
// deleted, and reports each one's reachability and capacity.
func NewFleet(rt adapter.Config, o Options, log *slog.Logger) (*Adapter, error) {
	if o.CredentialsDir == "" {
		return nil, errors.New("--management-cluster-credentials is required")
	}
	info, err := os.Stat(o.CredentialsDir)
	if err != nil {
		return nil, fmt.Errorf("--management-cluster-credentials: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("--management-cluster-credentials %s is not a directory", o.CredentialsDir)
	}
	if o.ProbeInterval < 0 || o.ProbeTimeout < 0 || o.PlacementRetry < 0 || o.ManagementClusterResync < 0 ||
		o.ControlPlaneVCPU < 0 || o.ControlPlaneMemoryGiB < 0 {
		return nil, errors.New("--probe-interval, --probe-timeout, --placement-retry, --management-cluster-resync, " +
			"--control-plane-vcpu and --control-plane-memory-gib must not be negative")
	}
	placer, err := placement(api.Kinds())
	if err != nil {
		return nil, err
	}
	runner, rec, err := newBase(rt, &o, log)
	if err != nil {
		return nil, err
	}
	f := newFleet(fleetConfig{
		placer: placer, dir: o.CredentialsDir, qps: o.KubeQPS, burst: o.KubeBurst,
		probeEvery: cmp.Or(o.ProbeInterval, DefaultProbeInterval), probeFor: cmp.Or(o.ProbeTimeout, DefaultProbeTimeout),
		specTTL:   managementClusterSpecTTL,
		transport: func(rt http.RoundTripper) http.RoundTripper { return runner.ExternalTransport("kubernetes", rt) },
		wake:      runner.Wake,
	}, runner.API(), log)
	rec.Placements, rec.PlacementRetry = f, o.PlacementRetry
	runner.AddReadinessCheck("management cluster caches", f.stale)
	if err := rec.Check(); err != nil {
		return nil, err
	}
	mcs := &managementClusters{fleet: f, resync: cmp.Or(o.ManagementClusterResync, DefaultManagementClusterResync),
		perControlPlane: capacity.ControlPlane{VCPU: cmp.Or(o.ControlPlaneVCPU, DefaultControlPlaneVCPU),
			MemoryGiB: cmp.Or(o.ControlPlaneMemoryGiB, DefaultControlPlaneMemoryGiB)}}
	sw, err := newSweeper(o, runner, rec.Metrics, f.sweepTargets, log)
	if err != nil {
		return nil, err
	}
	return &Adapter{Runner: runner, reconciler: rec, fleet: f, managementClusters: mcs, syncWait: o.SyncTimeout, sweeper: sw}, nil
}

// newSweeper builds the orphan sweep of the management clusters targets lists, over the clusters of this replica's
// shard.
func newSweeper(o Options, runner *adapter.Runner, m *Metrics, targets func() []sweepTarget, log *slog.Logger) (*sweeper, error) {
	if o.SweepGrace < 0 || o.SweepInterval < 0 {
		return nil, errors.New("--sweep-grace and --sweep-interval must not be negative")
	}
	grace := cmp.Or(o.SweepGrace, DefaultSweepGrace)
	orphans, err := adapter.NewOrphans(runner.API(), adapter.Clusters(), grace)
	if err != nil {
		return nil, err
	}
	return &sweeper{targets: targets, orphans: orphans, dryRun: o.SweepDryRun, grace: grace,
		every: cmp.Or(o.SweepInterval, DefaultSweepInterval), metrics: m, acted: map[types.UID]bool{},
		mine: runner.Owns, // its static shard, or the shards it holds leases on
		log:  log.With(slog.String("adapter", Name), slog.String("part", "sweep"))}, nil
}

// newBase checks the options both modes share and builds the runner and the reconciler without its management
// clusters.
func newBase(rt adapter.Config, o *Options, log *slog.Logger) (*adapter.Runner, *Reconciler, error) {
	if o.ProgressInterval <= 0 || o.SyncTimeout <= 0 {
		return nil, nil, errors.New("--progress-interval and --sync-timeout must be positive")
	}
	if o.KubeQPS < 0 || o.KubeBurst < 0 {
		return nil, nil, errors.New("--kube-api-qps and --kube-api-burst must be positive")
	}
	o.KubeQPS = cmp.Or(o.KubeQPS, DefaultKubeQPS)
	o.KubeBurst = cmp.Or(o.KubeBurst, DefaultKubeBurst)
	pull, err := newPullSecretFile(o.PullSecretFile)
	if err != nil {
		return nil, nil, err
	}
	o.ReapplyRate = cmp.Or(o.ReapplyRate, DefaultReapplyRate)
	o.ReapplyBurst = cmp.Or(o.ReapplyBurst, DefaultReapplyBurst)
	pacer, err := NewPacer(o.ReapplyRate, o.ReapplyBurst)
	if err != nil {
		return nil, nil, err
	}
	if rt.ResyncAfter == 0 {
		rt.ResyncAfter = DefaultResyncAfter
	}
	runner, err := adapter.New(rt, log)
	if err != nil {
		return nil, nil, err
	}
	metrics, err := NewMetrics(runner.Registerer())
	if err != nil {
		return nil, nil, err
	}
	rec := &Reconciler{PullSecret: pull.Read, ProgressInterval: o.ProgressInterval, Pacer: pacer, Metrics: metrics,
		Log:        log.With(slog.String("adapter", Name)),
		References: &apiReferences{runner: runner, streams: adapter.VersionStreams(), schedules: adapter.UpgradeSchedules()}}
	return runner, rec, nil
}

// Run lists the management cluster's HostedClusters and Secrets (New), then applies clusters until ctx ends (see
// adapter.Runner.Run); NewFleet's applier also reconciles the ManagementClusters, and stops every member's caches
// when it returns.
func (a *Adapter) Run(ctx context.Context) error {
	controllers := []adapter.Controller{{
		Kind:       adapter.Clusters(),
		Reconciler: a.reconciler,
		Dependents: []adapter.Dependents{
			{Kind: adapter.VersionStreams(), Field: "version_stream", Adapter: versionResolver,
				DataKeys: rollout.DataKeys(), Affected: rollout.AffectedData},
			{Kind: adapter.UpgradeSchedules(), Field: "upgrade_schedule"},
		},
	}}
	if a.kube != nil {
		if err := a.kube.start(ctx, a.syncWait); err != nil {
			return err
		}
	}
	if a.fleet != nil {
		defer a.fleet.close()
		controllers = append(controllers, adapter.Controller{Kind: api.Kinds().ManagementCluster, Reconciler: a.managementClusters})
	}
	sweepCtx, stop := context.WithCancel(ctx)
	var sweeping sync.WaitGroup
	sweeping.Go(func() { a.sweeper.run(sweepCtx) })
	defer sweeping.Wait()
	defer stop()
	return a.Runner.Run(ctx, controllers...)
}

// pullSecretFile is the pull secret, read again when the file changes (a mounted Secret is updated in place).
type pullSecretFile struct {
	path string

	mu      sync.Mutex
	content []byte
	modTime time.Time
	size    int64
}

func newPullSecretFile(path string) (*pullSecretFile, error) {
	if path == "" {
		return nil, errors.New("--pull-secret-file is required: HyperShift pulls the release with it (in development any {\"auths\":{}} will do)")
	}
	f := &pullSecretFile{path: path}
	if _, err := f.Read(); err != nil {
		return nil, err
	}
	return f, nil
}

// Read returns the pull secret; an error when the file cannot be read or is not a JSON object. While a rotation
// leaves the file unreadable, the last good content is returned.
func (f *pullSecretFile) Read() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := os.Stat(f.path)
	if err != nil {
		if f.content != nil {
			return f.content, nil
		}
		return nil, fmt.Errorf("pull secret file: %w", err)
	}
	if f.content != nil && info.ModTime().Equal(f.modTime) && info.Size() == f.size {
		return f.content, nil
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		if f.content != nil {
			return f.content, nil
		}
		return nil, fmt.Errorf("pull secret file: %w", err)
	}
	var auths map[string]any
	if err := json.Unmarshal(raw, &auths); err != nil {
		if f.content != nil {
			return f.content, nil
		}
		return nil, fmt.Errorf("pull secret file %s is not a .dockerconfigjson (a JSON object): %w", f.path, err)
	}
	f.content, f.modTime, f.size = raw, info.ModTime(), info.Size()
	return raw, nil
}
