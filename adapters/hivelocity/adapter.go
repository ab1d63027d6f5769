package hivelocity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// MetadataClaimSettle is the report metadata key of the replica's --claim-settle: replicas that disagree on it
// refuse to start.
const MetadataClaimSettle = "claim_settle"

// UserAgent is the User-Agent the provisioner sends Hivelocity: it names the replica, so that the API's (or the
// simulator's) log says who wrote what.
func UserAgent(replica string) string { return "hyperfleet-" + Name + "/" + replica }

// Options are the provisioner's own settings, beside the runtime's.
type Options struct {
	// URL is the Hivelocity API v2 base URL, or a hivelocity-sim's address.
	URL string
	// APIKeyFile holds the X-API-KEY; it is re-read when it changes.
	APIKeyFile string
	// Timeout bounds one Hivelocity request.
	Timeout time.Duration
	// AccountRPS and AccountBurst are the budget of every replica together: Hivelocity allows 3,600 calls an
	// hour per client IP, and replicas behind one IP share that. Each replica takes its share, divided by the
	// runtime's shard count (hvclient.Share), unless RPS or Burst set its own.
	AccountRPS   float64
	AccountBurst int
	// RPS and Burst, when set (RPS ≥ 0, Burst > 0), are this replica's budget, whatever the account's: RPS 0
	// means no budget at all (the pause after a 429 still applies). Negative RPS and zero Burst take the share.
	RPS   float64
	Burst int
	// RecheckAfter is how often a settled pool is looked at again (the runtime's --resync-after, unless set).
	RecheckAfter time.Duration
	// OrphanGrace is how long a device tagged for a node pool the API does not know stays so before it is
	// released, counted from when this replica first saw it; OrphanDryRun only lists such devices.
	OrphanGrace  time.Duration
	OrphanDryRun bool
	Settings
}

// DefaultOptions returns the defaults: the real API, an account budget of 0.9 calls a second with bursts of 10
// (under Hivelocity's 3,600 an hour) shared by the shards, a re-check of settled pools every minute, orphans
// released after 15 minutes, and DefaultSettings.
func DefaultOptions() Options {
	return Options{URL: hvclient.DefaultURL, Timeout: hvclient.DefaultTimeout, AccountRPS: hvclient.DefaultAccountRPS,
		AccountBurst: hvclient.DefaultAccountBurst, RPS: -1, Burst: 0, RecheckAfter: time.Minute,
		OrphanGrace: DefaultOrphanGrace, Settings: DefaultSettings()}
}

// AddFlags binds the options, with o's values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "hivelocity-url", o.URL, "Hivelocity API v2 base URL (a hivelocity-sim in development)")
	fs.StringVar(&o.APIKeyFile, "api-key-file", o.APIKeyFile, "file holding the Hivelocity API key (X-API-KEY), re-read when it changes")
	fs.DurationVar(&o.Timeout, "hivelocity-timeout", o.Timeout, "longest one Hivelocity request may take")
	fs.Float64Var(&o.AccountRPS, "hivelocity-account-rps", o.AccountRPS, "Hivelocity calls per second all replicas together may make (the account's 3,600 an hour, less a margin); each takes its share by --shard-count")
	fs.IntVar(&o.AccountBurst, "hivelocity-account-burst", o.AccountBurst, "Hivelocity calls all replicas together may make at once; each takes its share by --shard-count (at least 2)")
	fs.Float64Var(&o.RPS, "hivelocity-rps", o.RPS, "Hivelocity calls per second this replica may make, instead of its share of --hivelocity-account-rps (negative: the share; 0: no budget)")
	fs.IntVar(&o.Burst, "hivelocity-burst", o.Burst, "Hivelocity calls this replica may make at once, instead of its share of --hivelocity-account-burst (0: the share; else at least 2)")
	fs.DurationVar(&o.RecheckAfter, "recheck-after", o.RecheckAfter, "how often a settled pool's devices are looked at again")
	fs.DurationVar(&o.OrphanGrace, "orphan-grace", o.OrphanGrace, "how long a device tagged for a node pool the API does not know is left alone before it is released (from when this replica first saw it)")
	fs.BoolVar(&o.OrphanDryRun, "orphan-dry-run", o.OrphanDryRun, "only list (log and count) the orphaned devices that would be released")
	fs.StringVar(&o.BaseDomain, "base-domain", o.BaseDomain, "DNS domain of the hosts of clusters without spec.hosted_cluster.dns.base_domain")
	fs.DurationVar(&o.ClaimSettle, "claim-settle", o.ClaimSettle, "how long a claim waits before reading its tags back: at least twice the longest tag-write delay plus two fifths of itself (answers may take a fifth each); every replica needs the same")
	fs.DurationVar(&o.ListTTL, "device-list-ttl", o.ListTTL, "how long one device list serves every pool")
	fs.DurationVar(&o.PollInterval, "provisioning-poll-interval", o.PollInterval, "how soon a pool whose devices are changing is looked at again")
	fs.DurationVar(&o.StatusInterval, "status-interval", o.StatusInterval, "first wait between status reads of an installing device (doubles, up to 8 times)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long a device may ignore a shutdown before its reload is forced")
	fs.DurationVar(&o.RefusalBackoff, "refusal-backoff", o.RefusalBackoff, "how long a device whose call Hivelocity refused (4xx) is left alone; doubles with each refusal in a row")
	fs.DurationVar(&o.RefusalBackoffMax, "refusal-backoff-max", o.RefusalBackoffMax, "the longest a refused device is left alone")
	fs.IntVar(&o.RefusalLimit, "refusals-before-unhealthy", o.RefusalLimit, "refusals in a row after which the pool reports Health=False naming the device")
}

// clusterMaxAge is how long a cluster read for one reconcile serves the reconciles of its pools.
const clusterMaxAge = 10 * time.Minute

// Budget returns this replica's request budget when shards replicas share the account: RPS and Burst where set,
// else the replica's share of AccountRPS and AccountBurst.
func (o Options) Budget(shards int) (rps float64, burst int) {
	rps, burst = hvclient.Share(o.AccountRPS, o.AccountBurst, shards)
	if o.RPS >= 0 {
		rps = o.RPS
	}
	if o.Burst > 0 {
		burst = o.Burst
	}
	return rps, burst
}

// Check returns every option that cannot work, in one error.
func (o Options) Check() error {
	var errs []error
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--hivelocity-url %q must be an http(s) URL", o.URL))
	}
	if o.APIKeyFile == "" {
		errs = append(errs, errors.New("--api-key-file is required"))
	} else if key, err := os.ReadFile(o.APIKeyFile); err != nil {
		errs = append(errs, fmt.Errorf("--api-key-file: %w", err))
	} else if strings.TrimSpace(string(key)) == "" {
		errs = append(errs, fmt.Errorf("--api-key-file %s is empty", o.APIKeyFile))
	}
	if o.Timeout <= 0 || o.RecheckAfter <= 0 {
		errs = append(errs, errors.New("--hivelocity-timeout and --recheck-after must be positive"))
	}
	if o.AccountRPS < 0 {
		errs = append(errs, fmt.Errorf("--hivelocity-account-rps %v must not be negative (0: no budget)", o.AccountRPS))
	}
	if o.AccountBurst < hvclient.MinBurst {
		errs = append(errs, fmt.Errorf("--hivelocity-account-burst %d must be at least %d: a claim reserves its check and write together", o.AccountBurst, hvclient.MinBurst))
	}
	if o.Burst != 0 && o.Burst < hvclient.MinBurst {
		errs = append(errs, fmt.Errorf("--hivelocity-burst %d must be 0 (the share) or at least %d: a claim reserves its check and write together", o.Burst, hvclient.MinBurst))
	}
	if o.OrphanGrace <= 0 {
		errs = append(errs, errors.New("--orphan-grace must be positive"))
	}
	return errors.Join(append(errs, o.Settings.Check())...)
}

// Adapter is the provisioner on the shared runtime.
type Adapter struct {
	*adapter.Runner
	reconciler *Reconciler
	orphans    *orphanCollector
}

// New wires the provisioner: a Hivelocity client whose calls the runtime counts, the reconciler and the runner.
// rt.ResyncAfter defaults to o.RecheckAfter, so that a restarted provisioner re-checks too.
func New(rt adapter.Config, o Options, log *slog.Logger) (*Adapter, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if rt.ResyncAfter == 0 {
		rt.ResyncAfter = o.RecheckAfter
	}
	// The claim proof holds only if every replica settles as long (see claimBudget): reported, and refused on a
	// mismatch as the shard count is.
	rt.Agreed = maps.Clone(rt.Agreed)
	if rt.Agreed == nil {
		rt.Agreed = map[string]string{}
	}
	rt.Agreed[MetadataClaimSettle] = o.ClaimSettle.String()
	runner, err := adapter.New(rt, log)
	if err != nil {
		return nil, err
	}
	rps, burst := o.Budget(rt.ShardCount)
	log.Info("hivelocity request budget", slog.Float64("rps", rps), slog.Int("burst", burst), slog.Int("shard_count", rt.ShardCount),
		slog.Float64("account_rps", o.AccountRPS), slog.Bool("own", o.RPS >= 0 || o.Burst > 0))
	// Check has vetted what could make these fail, so that no listener the runner bound is left behind.
	client, err := hvclient.New(hvclient.Config{URL: o.URL, APIKeyFile: o.APIKeyFile, Transport: runner.ExternalTransport("hivelocity", nil),
		Timeout: o.Timeout, RPS: rps, Burst: burst, UserAgent: UserAgent(runner.Replica())})
	if err != nil {
		return nil, err
	}
	rec, err := NewReconciler(client, o.Settings, rt.Clock, log.With(slog.String("adapter", rt.Adapter)))
	if err != nil {
		return nil, err
	}
	// Mine is the runner's own test: its static shard, or the shards it holds leases on.
	orphans, err := newOrphanCollector(rec, runner.API(), OrphanSettings{Grace: o.OrphanGrace, DryRun: o.OrphanDryRun, Every: o.RecheckAfter,
		Mine: runner.Owns}, runner.Registerer())
	if err != nil {
		return nil, err
	}
	return &Adapter{Runner: runner, reconciler: rec, orphans: orphans}, nil
}

// Run provisions node pools, and collects orphaned devices, until ctx ends (see adapter.Runner.Run).
func (a *Adapter) Run(ctx context.Context) error {
	collectCtx, stop := context.WithCancel(ctx)
	var collector sync.WaitGroup
	collector.Go(func() { a.orphans.run(collectCtx) })
	// A pool reads its cluster's name and immutable base domain only: one read of a cluster serves its pools'
	// reconciles for clusterMaxAge. Of the pool it reads only its ids, name, generation, spec and deleted time,
	// so the re-checks it asks for while devices change take the pool as the last reconcile saw it.
	err := a.Runner.Run(ctx, adapter.Controller{Kind: adapter.NodePools(), Reconciler: a.reconciler, ParentMaxAge: clusterMaxAge,
		KeepObject: true})
	stop()
	collector.Wait()
	return err
}
