// Package hivelocity is the hivelocity-provisioner adapter: it turns each NodePool into bare-metal devices at
// Hivelocity. It claims devices an operator tagged for use (exactly once, although the API replaces a device's
// whole tag list and several replicas may try at once), reloads them with the pool's OS, hostname, SSH key and
// cloud-init user data, scales them to the pool's replicas, re-provisions them one at a time when the spec
// changes, replaces devices whose reload gets stuck, and releases (wipes and untags) the ones the pool no longer
// needs. The devices' tags are the only record of what a pool owns (see tags.go and README.md).
package hivelocity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// Name is the adapter name the provisioner reports under.
const Name = "hivelocity-provisioner"

// API is what the provisioner asks of Hivelocity; *hvclient.Client implements it. Errors match the hvclient
// sentinels.
type API interface {
	ListDevices(ctx context.Context) ([]hvclient.Device, error)
	GetDevice(ctx context.Context, id int32) (hvclient.Device, error)
	Status(ctx context.Context, id int32) (hvclient.Status, error)
	SetTags(ctx context.Context, id int32, tags []string) error
	Reload(ctx context.Context, id int32, r hvclient.Reload) error
	Power(ctx context.Context, id int32, action hvclient.PowerAction) error
	SSHKeys(ctx context.Context) ([]hvclient.SSHKey, error)
	OperatingSystems(ctx context.Context, productID int32) ([]string, error)
	// Reserve waits for n requests' worth of the request budget and returns a context whose next n requests
	// go out without waiting: a claim's check and write must not be held apart by the budget.
	Reserve(ctx context.Context, n int) (context.Context, error)
}

var _ API = (*hvclient.Client)(nil)

// Settings are the provisioner's timings and defaults.
type Settings struct {
	// BaseDomain names the hosts of clusters without spec.hosted_cluster.dns.base_domain, and released devices
	// (spare-<id>.<BaseDomain>).
	BaseDomain string
	// ClaimSettle is how long a claim waits between its write's answer and reading it back. It must be at least
	// twice the longest time a tag write takes to show in reads plus two fifths of itself (the most a claim lets
	// pass between its check's send and its write's send, and the longest its write's round trip may take):
	// see claimBudget and README.md. Every replica must run with the same value.
	ClaimSettle time.Duration
	// ListTTL is how long one device list serves every pool's reconcile.
	ListTTL time.Duration
	// PollInterval is how soon a pool whose devices are changing is reconciled again.
	PollInterval time.Duration
	// StatusInterval is the first wait between status GETs of a device whose installer runs (three times that
	// when the device list will show the new OS); it doubles, up to eight times StatusInterval.
	StatusInterval time.Duration
	// ShutdownTimeout is how long a device may ignore a shutdown before its reload is forced (skipPowerCheck).
	ShutdownTimeout time.Duration
	// LookupTTL is how long the account's SSH keys and the products' operating systems are cached.
	LookupTTL time.Duration
	// ClaimConcurrency bounds the claims (and status GETs) one reconcile makes at once.
	ClaimConcurrency int
	// RefusalBackoff is how long a device whose call Hivelocity refused (a 4xx) is left alone; it doubles with
	// each refusal in a row, up to RefusalBackoffMax. After RefusalLimit refusals in a row the pool reports
	// Health=False naming the device, the call and Hivelocity's message.
	RefusalBackoff, RefusalBackoffMax time.Duration
	RefusalLimit                      int
}

// DefaultSettings returns the defaults: a 6 s claim settle (tag writes that show up to 1.8 s late, answers up to
// 1.2 s: see claimBudget), a 30 s device list, 15 s polls while devices change.
func DefaultSettings() Settings {
	return Settings{BaseDomain: "hyperfleet.internal", ClaimSettle: 6 * time.Second, ListTTL: 30 * time.Second,
		PollInterval: 15 * time.Second, StatusInterval: 3 * time.Minute, ShutdownTimeout: 5 * time.Minute,
		LookupTTL: 10 * time.Minute, ClaimConcurrency: 8,
		RefusalBackoff: 15 * time.Second, RefusalBackoffMax: 30 * time.Minute, RefusalLimit: 3}
}

// Check returns every setting that cannot work, in one error.
func (s Settings) Check() error {
	var errs []error
	if !hvclient.ValidHostname("x." + s.BaseDomain) {
		errs = append(errs, fmt.Errorf("--base-domain %q is not a DNS domain", s.BaseDomain))
	}
	for name, d := range map[string]time.Duration{"--claim-settle": s.ClaimSettle, "--device-list-ttl": s.ListTTL,
		"--provisioning-poll-interval": s.PollInterval, "--status-interval": s.StatusInterval,
		"--shutdown-timeout": s.ShutdownTimeout, "lookup TTL": s.LookupTTL, "--refusal-backoff": s.RefusalBackoff,
		"--refusal-backoff-max": s.RefusalBackoffMax} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if s.RefusalLimit < 1 {
		errs = append(errs, errors.New("--refusals-before-unhealthy must be at least 1"))
	}
	if s.ClaimConcurrency < 1 {
		errs = append(errs, errors.New("claim concurrency must be at least 1"))
	}
	return errors.Join(errs...)
}

// claimWindow is how long after a reconcile began it may still write claims.
func (s Settings) claimWindow() time.Duration { return 4 * s.ClaimSettle }

// passDeadline is how long after a reconcile began it may still send anything: a claim written at the end of
// the claim window is read back after ClaimSettle, checked against a fresh list, and carried on at once.
func (s Settings) passDeadline() time.Duration { return s.claimWindow() + 3*s.ClaimSettle }

// finalizeAfter is how long after a pool's deletion a device list shows every write a reconcile that began
// before it could make: a write sent by the pass deadline shows within a settle.
func (s Settings) finalizeAfter() time.Duration { return s.passDeadline() + s.ClaimSettle }

// Reconciler reconciles NodePools into Hivelocity devices. Build it with NewReconciler; it is safe for the
// runtime's concurrent workers (one pool is never reconciled twice at once by one replica).
type Reconciler struct {
	api     API
	s       Settings
	clock   clock.WithTicker
	log     *slog.Logger
	devices *deviceCache
	lookups *lookups
	notes   *tracker
	// refused remembers the calls Hivelocity refused per device (see refusals).
	refused *refusals
}

var _ adapter.Reconciler = (*Reconciler)(nil)

// NewReconciler returns a reconciler over api. clk is the clock (nil: the real one), log may be nil. It fails
// without an API or with settings that cannot work.
func NewReconciler(api API, s Settings, clk clock.WithTicker, log *slog.Logger) (*Reconciler, error) {
	if api == nil {
		return nil, errors.New("hivelocity provisioner: no Hivelocity API")
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{api: api, s: s, clock: clk, log: log, notes: newTracker(), refused: newRefusals(),
		devices: &deviceCache{list: api.ListDevices, clock: clk, ttl: s.ListTTL},
		lookups: &lookups{api: api, clock: clk, ttl: s.LookupTTL}}, nil
}

// Reconcile brings the pool's devices to its spec: it carries on with running work, replaces failed devices,
// releases excess ones, re-provisions outdated ones one at a time and claims missing ones. It asks to be called
// again (RequeueAfter) while devices are changing.
func (r *Reconciler) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	pool, err := poolOf(obj, r.s.BaseDomain)
	if err != nil {
		out := outcomeOf(summary{Replicas: pool.Replicas, Blocked: err})
		return out, adapter.Terminal(ReasonInvalidSpec, err)
	}
	return r.newPass(obj, pool, false).run(ctx)
}

// Finalize releases every device of a deleted pool and reports Finalized only once the pool owns none, as a
// device list taken long enough after the deletion shows (see pass.finalized).
func (r *Reconciler) Finalize(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	pool, err := poolOf(obj, r.s.BaseDomain)
	if err != nil {
		// A spec that cannot be read must not keep a pool from being deleted: releasing needs only its ids.
		r.log.Info("finalizing a node pool whose spec cannot be read", slog.String("pool", obj.ID), slog.Any("error", err))
	}
	pool.Replicas = 0
	return r.newPass(obj, pool, true).run(ctx)
}

func (r *Reconciler) newPass(obj *adapter.Object, pool Pool, finalizing bool) *pass {
	now := r.clock.Now()
	r.notes.forget(now.Add(-time.Hour))
	return &pass{r: r, obj: obj, pool: pool, finalizing: finalizing, began: now, skips: map[SkipReason]int{},
		last: lastReportOf(obj.LastReport)}
}

// nonce returns a random claim nonce.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// transient classifies a failure for the runtime, with the reason its Health condition gives: retried with
// backoff (after a rate-limit pause, not before it ends: see pass.outcome).
func transient(err error) error {
	reason := ReasonUnavailable
	switch {
	case errors.Is(err, hvclient.ErrRateLimited):
		reason = ReasonRateLimited
	case errors.Is(err, hvclient.ErrUnauthorized):
		reason = ReasonUnauthorized
	case errors.Is(err, errSSHKeyNotFound):
		reason = ReasonSSHKeyNotFound
	case errors.Is(err, errOSNotOffered):
		reason = ReasonOSNotOffered
	}
	return adapter.Transient(reason, err)
}
