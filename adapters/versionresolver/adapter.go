package versionresolver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Options are the resolver's own settings, beside the runtime's.
type Options struct {
	// CincinnatiURL is the update service, e.g. https://api.openshift.com or a cincinnati-sim.
	CincinnatiURL     string
	CincinnatiTimeout time.Duration
	RecheckAfter      time.Duration
	RetryAfter        time.Duration
	// GraphCacheTTL is how long one channel's graph is shared between streams; 0 caches nothing.
	GraphCacheTTL time.Duration
	// RolloutInterval is how soon a stream whose rollout moves is looked at again.
	RolloutInterval time.Duration
	// Applier is the adapter whose reports on clusters say what they run (the HostedCluster applier).
	Applier string
}

// DefaultOptions are the resolver's defaults: the public Cincinnati, 5 minute re-checks, 1 minute retries.
func DefaultOptions() Options {
	return Options{CincinnatiURL: "https://api.openshift.com", CincinnatiTimeout: cincinnati.DefaultTimeout,
		RecheckAfter: DefaultRecheckAfter, RetryAfter: DefaultRetryAfter, GraphCacheTTL: 30 * time.Second,
		RolloutInterval: DefaultRolloutInterval, Applier: DefaultApplier}
}

// AddFlags binds the options, with o's values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CincinnatiURL, "cincinnati-url", o.CincinnatiURL, "Cincinnati update service base URL (a cincinnati-sim in development)")
	fs.DurationVar(&o.CincinnatiTimeout, "cincinnati-timeout", o.CincinnatiTimeout, "longest one graph request may take")
	fs.DurationVar(&o.RecheckAfter, "recheck-after", o.RecheckAfter, "how soon a resolved stream is checked for a newer patch")
	fs.DurationVar(&o.RetryAfter, "retry-after", o.RetryAfter, "how soon a failed check is tried again")
	fs.DurationVar(&o.GraphCacheTTL, "graph-cache-ttl", o.GraphCacheTTL, "how long a channel's graph is shared between streams (0: not cached)")
	fs.DurationVar(&o.RolloutInterval, "rollout-interval", o.RolloutInterval, "how soon a stream whose rollout moves is looked at again (one list of its clusters per page)")
	fs.StringVar(&o.Applier, "applier-adapter", o.Applier, "the adapter whose reports on clusters say which release they run")
}

// Adapter is the resolver on the shared runtime.
type Adapter struct {
	*adapter.Runner
	reconciler *Reconciler
}

// New wires the resolver: a Cincinnati client whose calls the runtime counts, a graph cache, the reconciler and
// the runner. rt.ResyncAfter defaults to the re-check interval, so that a restarted resolver re-checks too.
func New(rt adapter.Config, o Options, log *slog.Logger) (*Adapter, error) {
	if u, err := url.Parse(o.CincinnatiURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--cincinnati-url %q must be an http(s) URL", o.CincinnatiURL)
	}
	// Options built in code rather than from flags may leave the rollout's settings out: zero is the default.
	o.RolloutInterval = cmp.Or(o.RolloutInterval, DefaultRolloutInterval)
	o.Applier = cmp.Or(o.Applier, DefaultApplier)
	if o.RecheckAfter <= 0 || o.RetryAfter <= 0 || o.CincinnatiTimeout <= 0 || o.RolloutInterval <= 0 {
		return nil, fmt.Errorf("--recheck-after, --retry-after, --cincinnati-timeout and --rollout-interval must be positive")
	}
	if !conditions.ValidAdapterName(o.Applier) {
		return nil, fmt.Errorf("--applier-adapter %q is not an adapter name", o.Applier)
	}
	if rt.ResyncAfter == 0 {
		rt.ResyncAfter = o.RecheckAfter
	}
	runner, err := adapter.New(rt, log)
	if err != nil {
		return nil, err
	}
	client := cincinnati.NewClient(o.CincinnatiURL, &http.Client{Transport: runner.ExternalTransport("cincinnati", nil)},
		cincinnati.WithTimeout(o.CincinnatiTimeout), cincinnati.WithUserAgent("hyperfleet-version-resolver"))
	rec := &Reconciler{Graphs: NewCachedGraphs(client, o.GraphCacheTTL), RecheckAfter: o.RecheckAfter, RetryAfter: o.RetryAfter,
		Log: log.With(slog.String("adapter", rt.Adapter)), Fleet: &apiFleet{api: runner.API(), applier: o.Applier},
		RolloutInterval: o.RolloutInterval}
	if err := rec.Check(); err != nil {
		return nil, err
	}
	return &Adapter{Runner: runner, reconciler: rec}, nil
}

// Run resolves streams until ctx ends (see adapter.Runner.Run).
func (a *Adapter) Run(ctx context.Context) error {
	return a.Runner.Run(ctx, adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: a.reconciler})
}
