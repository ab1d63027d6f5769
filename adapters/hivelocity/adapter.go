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
	// RPS and Burst are the budget every call of this replica takes from. Hivelocity allows 3,600 calls an
	// hour per client IP: replicas behind one IP share that.
	RPS   float64
	Burst int
	// RecheckAfter is how often a settled pool is looked at again (the runtime's --resync-after, unless set).
	RecheckAfter time.Duration
	Settings
}

// DefaultOptions returns the defaults: the real API, 0.9 calls a second with bursts of 10 (under Hivelocity's
// 3,600 an hour), a re-check of settled pools every minute, and DefaultSettings.
func DefaultOptions() Options {
	return Options{URL: hvclient.DefaultURL, Timeout: hvclient.DefaultTimeout, RPS: 0.9, Burst: 10,
		RecheckAfter: time.Minute, Settings: DefaultSettings()}
}

// AddFlags binds the options, with o's values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "hivelocity-url", o.URL, "Hivelocity API v2 base URL (a hivelocity-sim in development)")
	fs.StringVar(&o.APIKeyFile, "api-key-file", o.APIKeyFile, "file holding the Hivelocity API key (X-API-KEY), re-read when it changes")
	fs.DurationVar(&o.Timeout, "hivelocity-timeout", o.Timeout, "longest one Hivelocity request may take")
	fs.Float64Var(&o.RPS, "hivelocity-rps", o.RPS, "Hivelocity calls per second this replica may make (its share of the account's 3,600 an hour)")
	fs.IntVar(&o.Burst, "hivelocity-burst", o.Burst, "Hivelocity calls this replica may make at once above --hivelocity-rps (at least 2)")
	fs.DurationVar(&o.RecheckAfter, "recheck-after", o.RecheckAfter, "how often a settled pool's devices are looked at again")
	fs.StringVar(&o.BaseDomain, "base-domain", o.BaseDomain, "DNS domain of the hosts of clusters without spec.hosted_cluster.dns.base_domain")
	fs.DurationVar(&o.ClaimSettle, "claim-settle", o.ClaimSettle, "how long a claim waits before reading its tags back: at least twice the longest tag-write delay plus two fifths of itself (answers may take a fifth each); every replica needs the same")
	fs.DurationVar(&o.ListTTL, "device-list-ttl", o.ListTTL, "how long one device list serves every pool")
	fs.DurationVar(&o.PollInterval, "provisioning-poll-interval", o.PollInterval, "how soon a pool whose devices are changing is looked at again")
	fs.DurationVar(&o.StatusInterval, "status-interval", o.StatusInterval, "first wait between status reads of an installing device (doubles, up to 8 times)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long a device may ignore a shutdown before its reload is forced")
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
	if o.RPS < 0 {
		errs = append(errs, fmt.Errorf("--hivelocity-rps %v must not be negative (0: no budget)", o.RPS))
	}
	if o.Burst < 2 {
		errs = append(errs, fmt.Errorf("--hivelocity-burst %d must be at least 2: a claim reserves its check and write together", o.Burst))
	}
	return errors.Join(append(errs, o.Settings.Check())...)
}

// Adapter is the provisioner on the shared runtime.
type Adapter struct {
	*adapter.Runner
	reconciler *Reconciler
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
	// Check has vetted what could make these fail, so that no listener the runner bound is left behind.
	client, err := hvclient.New(hvclient.Config{URL: o.URL, APIKeyFile: o.APIKeyFile, Transport: runner.ExternalTransport("hivelocity", nil),
		Timeout: o.Timeout, RPS: o.RPS, Burst: o.Burst, UserAgent: UserAgent(runner.Replica())})
	if err != nil {
		return nil, err
	}
	rec, err := NewReconciler(client, o.Settings, rt.Clock, log.With(slog.String("adapter", rt.Adapter)))
	if err != nil {
		return nil, err
	}
	return &Adapter{Runner: runner, reconciler: rec}, nil
}

// Run provisions node pools until ctx ends (see adapter.Runner.Run).
func (a *Adapter) Run(ctx context.Context) error {
	return a.Runner.Run(ctx, adapter.Controller{Kind: adapter.NodePools(), Reconciler: a.reconciler})
}
