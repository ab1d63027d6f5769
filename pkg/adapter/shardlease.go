package adapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/shard"
)

// Defaults of lease mode (Config.ShardLeases).
const (
	// DefaultShardLeaseTTL is a lease's life after its last renewal: a lost replica's shards move within about
	// a TTL and a third (its leases expire, then another replica's next renewal takes them).
	DefaultShardLeaseTTL = 15 * time.Second
	// MaxShardLeaseTTL is the longest TTL the API grants.
	MaxShardLeaseTTL = 10 * time.Minute
)

// leaseCodeLost is the API's refusal of a report made under a lease the replica no longer holds (fencing).
const leaseCodeLost = "HYPERFLEET-CNF-008"

func (c *Config) checkShardLeases() []error {
	if !c.ShardLeases {
		return nil
	}
	var errs []error
	if c.ShardIndex != 0 {
		errs = append(errs, errors.New("--shard-index does not go with --shard-leases: the replica leases its shards from the API"))
	}
	if c.ShardLeaseTTL != 0 && (c.ShardLeaseTTL < time.Second || c.ShardLeaseTTL > MaxShardLeaseTTL || c.ShardLeaseTTL%time.Second != 0) {
		errs = append(errs, fmt.Errorf("--shard-lease-ttl %s must be whole seconds from 1s to %s", c.ShardLeaseTTL, MaxShardLeaseTTL))
	}
	if c.Source == SourceNATS {
		// One durable consumer per static shard: a replica that holds shards that change cannot name its consumers.
		errs = append(errs, errors.New("--shard-leases works with --source watch or poll, not nats"))
	}
	return errs
}

// rateShard is the api.ShardHeader value the replica sends, which names its rate budget at the API: its shard,
// or with leases (no fixed shard) a shard named by a hash of the replica's name, so that replicas mostly draw on
// budgets of their own.
func rateShard(cfg Config) string {
	if cfg.ShardLeases {
		return api.FormatShard(ShardOf(cfg.Replica, cfg.ShardCount), cfg.ShardCount)
	}
	return api.FormatShard(cfg.ShardIndex, cfg.ShardCount)
}

// Owns reports whether this replica reconciles the resource id now (see owns): what an adapter's own background
// work (an orphan sweep, a budget split) asks so that one replica acts on each resource, with static shards or
// leased ones.
func (r *Runner) Owns(id string) bool { return r.owns(id) }

// owns reports whether this replica reconciles the resource id now: its shard is this replica's --shard-index,
// or, with leases, a shard it holds a live lease on.
func (r *Runner) owns(id string) bool {
	s := ShardOf(id, r.cfg.ShardCount)
	if r.leases == nil {
		return s == r.cfg.ShardIndex
	}
	_, ok := r.leases.lease(s)
	return ok
}

// workLease is the lease a reconcile runs under: its context ends when the lease is lost, and its generation
// goes into the report. nil without leases.
type workLease struct {
	shard      int
	count      int
	generation int64
}

// leaseWork returns ctx bounded by the lease on id's shard, and the lease to stamp the report with; ok is false
// when this replica no longer holds the shard (the key is for its new holder). Without leases it returns ctx.
func (r *Runner) leaseWork(ctx context.Context, id string) (context.Context, context.CancelFunc, *workLease, bool) {
	if r.leases == nil {
		return ctx, func() {}, nil, true
	}
	s := ShardOf(id, r.cfg.ShardCount)
	held, ok := r.leases.lease(s)
	if !ok {
		return ctx, func() {}, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(held.ctx, cancel)
	return ctx, func() { stop(); cancel() }, &workLease{shard: s, count: r.cfg.ShardCount, generation: held.generation}, true
}

// stamp puts the lease into a report's metadata, for the API to fence it; shard_index means nothing in lease mode.
func (l *workLease) stamp(metadata map[string]any) {
	if l == nil {
		return
	}
	delete(metadata, "shard_index")
	metadata[shard.MetadataShard] = l.shard
	metadata[shard.MetadataShardCount] = l.count
	metadata[shard.MetadataLeaseGeneration] = l.generation
}

// isLeaseLost reports whether the API refused a report because its lease is no longer current.
func isLeaseLost(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusConflict && e.Code == leaseCodeLost
}

// heldLease is one shard's lease as this replica holds it: ctx ends when it is lost or given back.
type heldLease struct {
	generation int64
	ctx        context.Context
	cancel     context.CancelFunc
}

// shardLeaser keeps this replica's shard leases: it renews them every third of the TTL, takes and gives back
// shards as the API decides, and drops every lease two thirds of a TTL after its last successful renewal, before
// the API lets another replica take them.
type shardLeaser struct {
	r        *Runner
	kinds    []*Kind
	ttl      time.Duration
	deadline time.Duration

	mu   sync.Mutex
	held map[int]*heldLease
	// validUntil is when the held leases stop counting here (the last successful renewal's start plus deadline).
	validUntil time.Time
}

func newShardLeaser(r *Runner) *shardLeaser {
	ttl := r.cfg.ShardLeaseTTL
	return &shardLeaser{r: r, ttl: ttl, deadline: ttl * 2 / 3, held: map[int]*heldLease{}}
}

// lease returns the live lease on shard s.
func (l *shardLeaser) lease(s int) (*heldLease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[s]
	if !ok || !l.r.clock.Now().Before(l.validUntil) {
		return nil, false
	}
	return h, true
}

// shards returns the held shards with their generations.
func (l *shardLeaser) shards() map[int]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]int64, len(l.held))
	for s, h := range l.held {
		out[s] = h.generation
	}
	return out
}

// startShardLeases starts renewing leases when the runner has them, for the kinds of controllers; the returned
// function stops renewing and gives every lease back (call it once the workers have drained).
func (r *Runner) startShardLeases(ctx context.Context, controllers []Controller) func() {
	if r.leases == nil {
		return func() {}
	}
	for _, c := range controllers {
		r.leases.kinds = append(r.leases.kinds, c.Kind)
	}
	// Leases outlive ctx (SIGTERM) so that in-flight reconciles can report while they drain.
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); r.leases.run(loopCtx) }()
	return func() {
		cancel()
		<-done
		r.leases.release()
	}
}

func (l *shardLeaser) run(ctx context.Context) {
	for {
		l.renew(ctx)
		select {
		case <-ctx.Done():
			return
		case <-l.r.clock.After(l.ttl / 3):
		}
	}
}

// renew asks the API once. The call may take at most until the held leases stop counting (or a third of a TTL
// when none do), so that a slow or unreachable API makes the replica stop reconciling in time.
func (l *shardLeaser) renew(ctx context.Context) {
	now := l.r.clock.Now()
	held := l.shards()
	l.mu.Lock()
	timeout := max(l.validUntil.Sub(now), l.ttl/3)
	l.mu.Unlock()
	callCtx, cancel := context.WithTimeout(withOp(ctx, "shard leases"), timeout)
	defer cancel()
	grant, err := l.call(callCtx, held, false)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		l.r.log.Warn("could not renew the shard leases", slog.Any("error", err), slog.Int("held", len(held)))
		l.mu.Lock()
		expired := len(l.held) > 0 && !l.r.clock.Now().Before(l.validUntil)
		l.mu.Unlock()
		if expired {
			l.dropAll("the renew deadline passed: stopped reconciling every shard until the API answers again")
		}
		return
	}
	l.apply(ctx, grant, now)
}

func (l *shardLeaser) call(ctx context.Context, held map[int]int64, release bool) (*api.ShardLeaseGrant, error) {
	body := api.ShardLeaseRequest{Replica: l.r.cfg.Replica, ShardCount: l.r.cfg.ShardCount, TtlSeconds: int(l.ttl / time.Second)}
	list := make([]api.HeldShardLease, 0, len(held))
	for _, s := range slices.Sorted(maps.Keys(held)) {
		list = append(list, api.HeldShardLease{Shard: s, Generation: held[s]})
	}
	body.Held = &list
	if release {
		body.Release = &release
	}
	answer, err := api.ReadAnswer[api.ShardLeaseGrant](l.r.api.plain.AcquireShardLeases(ctx, l.r.cfg.Adapter, body))
	if err := check(ctx, answer, err); err != nil {
		return nil, err
	}
	return answer.JSON200, nil
}

// apply makes the grant this replica's leases: lost ones end their reconciles, gained ones are re-checked.
func (l *shardLeaser) apply(ctx context.Context, g *api.ShardLeaseGrant, sent time.Time) {
	l.mu.Lock()
	granted := make(map[int]int64, len(g.Leases))
	for _, lease := range g.Leases {
		granted[lease.Shard] = lease.Generation
	}
	var lost, gained []int
	for s, h := range l.held {
		if gen, ok := granted[s]; !ok || gen != h.generation {
			h.cancel()
			delete(l.held, s)
			lost = append(lost, s)
		}
	}
	for s, gen := range granted {
		if _, ok := l.held[s]; ok {
			continue
		}
		hctx, cancel := context.WithCancel(ctx)
		l.held[s] = &heldLease{generation: gen, ctx: hctx, cancel: cancel}
		gained = append(gained, s)
	}
	l.validUntil = sent.Add(l.deadline)
	total := len(l.held)
	l.mu.Unlock()
	slices.Sort(lost)
	slices.Sort(gained)
	if len(lost) > 0 || len(gained) > 0 {
		l.r.log.Info("shard leases changed", slog.Any("gained", gained), slog.Any("lost", lost), slog.Int("held", total),
			slog.Int("live_replicas", g.LiveReplicas), slog.Int("fair_share", g.FairShare), slog.Int("shard_count", g.ShardCount))
	}
	if len(gained) > 0 {
		go l.recheck(ctx, gained)
	}
}

// dropAll ends every held lease here (the API has not said so: it may still list them until they expire).
func (l *shardLeaser) dropAll(why string) {
	l.mu.Lock()
	n := len(l.held)
	for s, h := range l.held {
		h.cancel()
		delete(l.held, s)
	}
	l.mu.Unlock()
	if n > 0 {
		l.r.log.Warn(why, slog.Int("dropped", n))
	}
}

// release gives every lease back as the replica stops, so that the others need not wait for them to expire.
func (l *shardLeaser) release() {
	held := l.shards()
	l.dropAll("stopping: gave back every shard")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.call(withOp(ctx, "shard leases"), held, true); err != nil {
		l.r.log.Warn("could not give the shard leases back; they expire on their own", slog.Any("error", err))
	}
}

// recheck offers every resource of the gained shards once, as a replica does at start: the work their previous
// holder left in progress (a scheduled follow-up, a retry) is looked at again now rather than at the next change.
func (l *shardLeaser) recheck(ctx context.Context, gained []int) {
	r := l.r
	want := make(map[int]bool, len(gained))
	for _, s := range gained {
		want[s] = true
	}
	for _, kind := range l.kinds {
		added, after := 0, ""
		for {
			q := listQuery{pendingFor: r.cfg.Adapter, resyncAfter: startupRecheck, includeDeleted: true,
				fields: "id,generation,owner_references", size: r.cfg.PageSize, order: "id", after: after}
			page, err := r.api.list(withOp(ctx, "list gained shards"), kind, "", q)
			if err != nil {
				if ctx.Err() == nil {
					// The poll finds what is pending in the meantime; a change wakes the rest.
					r.log.Warn("could not list the resources of gained shards", slog.String("kind", kind.Name), slog.Any("error", err))
				}
				break
			}
			for _, it := range page.items {
				if !want[ShardOf(it.ID, r.cfg.ShardCount)] || !r.owns(it.ID) {
					continue
				}
				r.held.unkeep(it.Key) // what this replica saw before the shard left it is no guide
				if r.queue.offer(it.Key, it.Generation) {
					added++
				}
			}
			if page.next == "" {
				break
			}
			after = page.next
		}
		r.log.Info("re-checking every resource of the gained shards", slog.String("kind", kind.Name), slog.Any("shards", gained), slog.Int("queued", added))
	}
}
