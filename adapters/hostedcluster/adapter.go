package hostedcluster

import (
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
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
}

// DefaultOptions are the applier's defaults: HyperShift's conventional "clusters" namespace.
func DefaultOptions() Options {
	return Options{Namespace: "clusters", ProgressInterval: DefaultProgressInterval, SyncTimeout: 2 * time.Minute,
		ReapplyRate: DefaultReapplyRate, ReapplyBurst: DefaultReapplyBurst}
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
}

// Adapter is the applier on the shared runtime.
type Adapter struct {
	*adapter.Runner
	reconciler *Reconciler
	kube       *kubeCluster
	syncWait   time.Duration
}

// New wires the applier to the management cluster that kube reaches: its watch caches, whose events wake the
// clusters HyperShift changes, the reconciler, and the runner with the clusters' VersionStreams and UpgradeSchedules
// as dependents (a re-resolved image or a changed schedule re-queues the clusters that name it at once).
func New(rt adapter.Config, o Options, kube *rest.Config, log *slog.Logger) (*Adapter, error) {
	if o.Namespace == "" {
		return nil, errors.New("--namespace is required")
	}
	if o.ProgressInterval <= 0 || o.SyncTimeout <= 0 {
		return nil, errors.New("--progress-interval and --sync-timeout must be positive")
	}
	pull, err := newPullSecretFile(o.PullSecretFile)
	if err != nil {
		return nil, err
	}
	if o.ReapplyRate == 0 {
		o.ReapplyRate = DefaultReapplyRate
	}
	if o.ReapplyBurst == 0 {
		o.ReapplyBurst = DefaultReapplyBurst
	}
	pacer, err := NewPacer(o.ReapplyRate, o.ReapplyBurst)
	if err != nil {
		return nil, err
	}
	if rt.ResyncAfter == 0 {
		rt.ResyncAfter = DefaultResyncAfter
	}
	runner, err := adapter.New(rt, log)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(kube)
	cfg.UserAgent = "hyperfleet-" + Name
	// Calls are counted on top of whatever the given config already wraps its transport with.
	wrapped := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrapped != nil {
			rt = wrapped(rt)
		}
		return runner.ExternalTransport("kubernetes", rt)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("management cluster client: %w", err)
	}
	clusters := adapter.Clusters()
	mgmt, err := newKubeCluster(client, o.Namespace, func(id string) { runner.Wake(clusters, "", id) }, log)
	if err != nil {
		return nil, err
	}
	rec := &Reconciler{Cluster: mgmt, Namespace: o.Namespace, PullSecret: pull.Read, ProgressInterval: o.ProgressInterval, Pacer: pacer,
		References: &apiReferences{runner: runner, streams: adapter.VersionStreams(), schedules: adapter.UpgradeSchedules()}}
	if err := rec.Check(); err != nil {
		return nil, err
	}
	return &Adapter{Runner: runner, reconciler: rec, kube: mgmt, syncWait: o.SyncTimeout}, nil
}

// Run lists the management cluster's HostedClusters and Secrets, then applies clusters until ctx ends (see
// adapter.Runner.Run).
func (a *Adapter) Run(ctx context.Context) error {
	if err := a.kube.start(ctx, a.syncWait); err != nil {
		return err
	}
	return a.Runner.Run(ctx, adapter.Controller{
		Kind:       adapter.Clusters(),
		Reconciler: a.reconciler,
		Dependents: []adapter.Dependents{
			{Kind: adapter.VersionStreams(), Field: "version_stream", Adapter: versionResolver,
				DataKeys: rollout.DataKeys(), Affected: rollout.AffectedData},
			{Kind: adapter.UpgradeSchedules(), Field: "upgrade_schedule"},
		},
	})
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
