package hivelocity

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// DefaultOrphanGrace is how long an orphaned device is left alone before it is released: far longer than a tag
// write takes to show (a device a pool's finalizer has just untagged may still look tagged for a moment), and
// long enough for an operator to notice a pool deleted by mistake.
const DefaultOrphanGrace = 15 * time.Minute

// poolGetter reads node pools from hyperfleet-api; *adapter.API is one. Get's error matches adapter.ErrNotFound
// when the API says the pool does not exist; IDs lists every pool's id, deleting ones included.
type poolGetter interface {
	IDs(ctx context.Context, kind *adapter.Kind) (map[string]bool, error)
	Get(ctx context.Context, kind *adapter.Kind, parentID, id string) (*adapter.Object, error)
}

var _ poolGetter = (*adapter.API)(nil)

// OrphanSettings configure the orphan collector.
type OrphanSettings struct {
	// Grace is how long a pool must be unknown to the API, from when this replica first saw it so, before its
	// devices are released.
	Grace time.Duration
	// DryRun only lists (logs and counts) the devices that would be released.
	DryRun bool
	// Every is how often the collector looks: one device list (shared with every pool's reconcile), one list of
	// the node pools' ids from the API (a request per 500 pools) and a GET of each pool the devices name that the
	// list lacks.
	Every time.Duration
	// Mine says whether a pool id is this replica's to collect (its shard), so that one replica acts on each.
	Mine func(poolID string) bool
}

// orphanMetrics count orphaned devices.
type orphanMetrics struct {
	found, released, listed prometheus.Counter
	known                   prometheus.Gauge
}

func newOrphanMetrics(reg prometheus.Registerer) (*orphanMetrics, error) {
	m := &orphanMetrics{
		found: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperfleet_hivelocity_orphaned_devices_found_total",
			Help: "Devices found tagged for a node pool the API says does not exist (404).",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperfleet_hivelocity_orphaned_devices_released_total",
			Help: "Orphaned devices released (wiped and untagged) after the grace period.",
		}),
		listed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperfleet_hivelocity_orphaned_devices_listed_total",
			Help: "Orphaned devices past the grace period that --orphan-dry-run only listed.",
		}),
		known: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperfleet_hivelocity_orphaned_devices",
			Help: "Orphaned devices this replica knows of now, in its grace period or being released.",
		}),
	}
	for _, c := range []prometheus.Collector{m.found, m.released, m.listed, m.known} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// orphan is a node pool id that devices name and the API does not know.
type orphan struct {
	pool, cluster string
	since         time.Time      // when this replica first saw the API say so
	devices       map[int32]bool // its devices in the last list
	acted         bool           // a release pass has run for it
	listed        map[int32]bool // devices a dry run has listed
	next          time.Time      // when its next release pass is due
}

// orphanCollector releases devices tagged for node pools the API does not know: leaked by a pool removed
// without its finalizer (force-delete, a restored database), or tagged by hand. Release is what a deleted pool's
// finalizer does (Reconciler.Finalize for a pool of that id): shut down, wipe, untag. Only its run goroutine
// touches its state.
type orphanCollector struct {
	r       *Reconciler
	pools   poolGetter
	s       OrphanSettings
	metrics *orphanMetrics
	log     *slog.Logger

	known   map[string]*orphan // by pool id
	scanned time.Time          // when the API was last asked about the pools
}

func newOrphanCollector(r *Reconciler, pools poolGetter, s OrphanSettings, reg prometheus.Registerer) (*orphanCollector, error) {
	if r == nil || pools == nil || s.Grace <= 0 || s.Every <= 0 {
		return nil, errors.New("orphan collector: a reconciler, a pool reader, a grace period and an interval are required")
	}
	if s.Mine == nil {
		s.Mine = func(string) bool { return true }
	}
	m, err := newOrphanMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &orphanCollector{r: r, pools: pools, s: s, metrics: m, log: r.log.With(slog.String("part", "orphans")),
		known: map[string]*orphan{}}, nil
}

// run collects until ctx ends.
func (c *orphanCollector) run(ctx context.Context) {
	for {
		wait := c.collect(ctx)
		t := c.r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// collect is one round: it reads the shared device list, asks the API about the pools the devices name (at most
// once per Every), starts the grace period of the pools it does not know, and releases (or, in a dry run, lists)
// the devices of those whose grace has passed. It returns how long to wait for the next round.
func (c *orphanCollector) collect(ctx context.Context) time.Duration {
	// A list up to Every old will do: an orphan waits a grace period far longer, and while pools are reconciled
	// the collector then costs Hivelocity no call.
	snap, err := c.r.devices.within(ctx, c.s.Every)
	if err != nil {
		c.log.Info("orphan collection: no device list", slog.Any("error", err))
		return c.s.Every
	}
	now := c.r.clock.Now()
	byPool := c.group(snap)
	c.forgetGone(byPool)
	if now.Sub(c.scanned) >= c.s.Every {
		c.scanned = now
		c.check(ctx, byPool, now)
	}
	total := 0
	for _, o := range c.known {
		total += len(o.devices)
	}
	c.metrics.known.Set(float64(total))
	for _, id := range slices.Sorted(maps.Keys(c.known)) {
		if ctx.Err() != nil {
			break
		}
		o := c.known[id]
		if now.Sub(o.since) < c.s.Grace {
			continue
		}
		if c.s.DryRun {
			c.list(o)
		} else if !now.Before(o.next) {
			c.release(ctx, o)
		}
	}
	return c.nextRound(now)
}

// group returns the devices of every pool in this replica's shard, by pool id, as the list shows them with this
// replica's own recent writes.
func (c *orphanCollector) group(snap *snapshot) map[string]*orphan {
	out := map[string]*orphan{}
	for i := range snap.devices {
		d := &snap.devices[i]
		own, owned := ownershipOf(c.r.notes.tagsOf(*d, snap.taken))
		if !owned || own.NodePool == "" || !c.s.Mine(own.NodePool) {
			continue
		}
		o := out[own.NodePool]
		if o == nil {
			o = &orphan{pool: own.NodePool, cluster: own.Cluster, devices: map[int32]bool{}}
			out[own.NodePool] = o
		}
		o.devices[d.ID] = true
	}
	return out
}

// forgetGone updates the known orphans' devices from the list: a device no longer tagged for its pool after a
// release pass ran was released; a pool with no device left is forgotten.
func (c *orphanCollector) forgetGone(byPool map[string]*orphan) {
	for id, o := range c.known {
		now := byPool[id]
		for dev := range o.devices {
			if now != nil && now.devices[dev] {
				continue
			}
			if o.acted {
				c.metrics.released.Inc()
				c.log.Info("orphaned device released", slog.String("pool", id), slog.Int("device_id", int(dev)))
			}
			delete(o.devices, dev)
		}
		if now == nil {
			delete(c.known, id)
			continue
		}
		for dev := range now.devices {
			if !o.devices[dev] {
				o.devices[dev] = true
				c.metrics.found.Inc()
			}
		}
	}
}

// check asks the API about every pool the devices name: a pool it says does not exist (404) becomes an orphan,
// its grace starting now; a pool it knows (deleting or not) is not one, and one it could not answer for stays as
// it was. One list of every pool's id (a request per 500 pools) answers for most; a pool missing from it is asked
// about on its own, so that only the API's 404 makes an orphan.
func (c *orphanCollector) check(ctx context.Context, byPool map[string]*orphan, now time.Time) {
	live, err := c.pools.IDs(ctx, adapter.NodePools())
	if err != nil {
		c.log.Info("orphan collection: cannot list the node pools", slog.Any("error", err))
		return
	}
	for _, id := range slices.Sorted(maps.Keys(byPool)) {
		if ctx.Err() != nil {
			return
		}
		seen := byPool[id]
		err = nil // in the list: it exists
		if !live[id] {
			_, err = c.pools.Get(ctx, adapter.NodePools(), seen.cluster, id)
		}
		switch {
		case err == nil:
			if _, ok := c.known[id]; ok {
				c.log.Info("node pool exists after all: its devices are not orphaned", slog.String("pool", id))
				delete(c.known, id)
			}
		case errors.Is(err, adapter.ErrNotFound):
			if _, ok := c.known[id]; ok {
				continue
			}
			seen.since, seen.listed = now, map[int32]bool{}
			c.known[id] = seen
			c.metrics.found.Add(float64(len(seen.devices)))
			c.log.Warn("devices tagged for a node pool that does not exist: released after the grace period unless it reappears",
				slog.String("pool", id), slog.String("cluster", seen.cluster), slog.Any("device_ids", sortedIDs(seen.devices)),
				slog.Time("release_after", now.Add(c.s.Grace)), slog.Bool("dry_run", c.s.DryRun))
		default:
			c.log.Info("orphan collection: cannot tell whether a node pool exists", slog.String("pool", id), slog.Any("error", err))
		}
	}
}

// list logs and counts, once each, the devices a dry run would release.
func (c *orphanCollector) list(o *orphan) {
	for _, dev := range sortedIDs(o.devices) {
		if o.listed[dev] {
			continue
		}
		o.listed[dev] = true
		c.metrics.listed.Inc()
		c.log.Warn("orphaned device would be released (dry run)", slog.String("pool", o.pool), slog.String("cluster", o.cluster),
			slog.Int("device_id", int(dev)), slog.Time("orphaned_since", o.since))
	}
}

// release runs a deleted pool's finalizer for o: one pass, which moves each device one step (shutdown, wipe,
// untag) and says when the next is due.
func (c *orphanCollector) release(ctx context.Context, o *orphan) {
	obj := &adapter.Object{Kind: adapter.NodePools().Name, ID: o.pool, ParentID: o.cluster}
	pool := Pool{ID: o.pool, ClusterID: o.cluster, Domain: c.r.s.BaseDomain, OSName: DefaultOSName,
		OffTimeout: DefaultReloadTimeoutPoweredOff, OnTimeout: DefaultReloadTimeoutPoweredOn}
	// DeletedTime stays nil: the pass then never asks for a fresh list to prove the pool empty, which only a
	// finalizer needs; the collector's next list tells.
	passCtx, cancel := context.WithTimeout(ctx, c.r.s.passDeadline()+fetchTimeout)
	defer cancel()
	out, err := c.r.newPass(obj, pool, true).run(passCtx)
	o.acted = true
	wait := out.RequeueAfter
	if wait <= 0 || wait > c.s.Every {
		wait = c.s.Every
	}
	o.next = c.r.clock.Now().Add(wait)
	if err != nil {
		c.log.Info("orphan release pass failed; retried", slog.String("pool", o.pool), slog.Any("error", err))
		return
	}
	c.log.Info("orphaned devices being released", slog.String("pool", o.pool), slog.Any("device_ids", sortedIDs(o.devices)))
}

// nextRound is how long until something is due: the next look at the API, the end of a grace period, a release
// pass.
func (c *orphanCollector) nextRound(now time.Time) time.Duration {
	next := c.scanned.Add(c.s.Every)
	for _, o := range c.known {
		due := o.since.Add(c.s.Grace)
		if !c.s.DryRun && !o.next.IsZero() && o.next.After(due) {
			due = o.next
		}
		if c.s.DryRun && now.After(due) {
			continue
		}
		if due.Before(next) {
			next = due
		}
	}
	return max(next.Sub(now), c.r.s.PollInterval/10)
}

func sortedIDs(m map[int32]bool) []int32 { return slices.Sorted(maps.Keys(m)) }
