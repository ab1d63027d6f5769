package adapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Controller is one kind an adapter reconciles: the kind, its reconciler, and the other kinds whose changes
// re-queue it. A runner serves one or more controllers with one queue, one set of workers and one ops listener.
type Controller struct {
	Kind       *Kind
	Reconciler Reconciler
	// Dependents re-queue resources of Kind when a resource they name changes (see Dependents).
	Dependents []Dependents
	// ParentMaxAge lets a parent this runner read for one reconcile of a child kind serve the reconciles of its
	// other children, and its own later ones, for this long, in place of a read each (0: every reconcile reads the
	// parent). Set it only when the reconciler reads nothing of Object.Parent that can change: the Hivelocity
	// provisioner reads the cluster's name and immutable base domain.
	ParentMaxAge time.Duration
	// KeepObject lets the reconciles the runtime schedules itself (RequeueAfter, a retry) take the resource as
	// the last reconcile saw it, in place of a read. Every event, poll or wake about the resource drops that copy
	// first: a new generation and a deletion always come as one, since they make the resource pending. Set it only
	// when the reconciler reads nothing of Object but its ids, name, generation, spec and deleted time (not its
	// labels or aggregated status, which change without an event to this adapter): the Hivelocity provisioner.
	KeepObject bool
}

// Runner runs one adapter: its sources, the queue, the workers and the ops endpoints.
type Runner struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.WithTicker
	api      *API
	queue    *workQueue
	reports  *reportCache
	held     *heldObjects
	parents  *parentCache
	metrics  *metrics
	registry *prometheus.Registry
	ops      net.Listener
	started  time.Time

	// lastContact is when a source last heard from the API or NATS (unix nanoseconds; 0 before the first time):
	// a poll or list that succeeded, a byte of a watch, a pull from NATS.
	lastContact atomic.Int64
	// listed is set once the pending work of a kind has been listed: by a poll, or by a watch before it watches.
	listed   atomic.Bool
	stopping atomic.Bool
	health   *health
	// dependents are the running Dependents sources; set by Run before any worker starts, read-only after.
	dependents []*dependentsSource
	// leases are the shards this replica holds with Config.ShardLeases; nil with static shards.
	leases *shardLeaser
}

// New checks cfg, reads the token file and binds the ops listener; Run starts the work. log should carry no
// attributes of its own: the runner adds the adapter, and the kind of each reconcile.
func New(cfg Config, log *slog.Logger) (*Runner, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg = cfg.withSourceDefaults()
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Replica == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("no --replica given and no host name to use instead: %w", err)
		}
		cfg.Replica = host
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	r := &Runner{cfg: cfg, clock: cfg.Clock, registry: prometheus.NewRegistry(), log: log.With(slog.String("adapter", cfg.Adapter))}
	r.queue = newWorkQueue(newJitteredBackoff(cfg.BackoffBase, cfg.BackoffMax, nil), cfg.Clock)
	r.reports = newReportCache()
	r.held = newHeldObjects()
	r.parents = newParentCache()
	r.health = newHealth(cfg.Workers)
	r.metrics = newMetrics(r.registry, cfg.Adapter, gauges{
		queueDepth:    func() float64 { return float64(r.queue.Len()) },
		cachedReports: func() float64 { return float64(r.reports.len()) },
		live:          func() float64 { return oneIfNil(r.liveness()) },
		ready:         func() float64 { return oneIfNil(r.readiness()) },
	})
	var token *tokenFile
	if cfg.TokenFile != "" {
		var err error
		if token, err = newTokenFile(cfg.TokenFile); err != nil {
			return nil, err
		}
	}
	var err error
	if r.api, err = newAPI(cfg.APIURL, token, cfg.Transport, r.metrics, rateShard(cfg)); err != nil {
		return nil, err
	}
	if cfg.ShardLeases {
		r.leases = newShardLeaser(r)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", cfg.OpsBindAddress)
	if err != nil {
		return nil, fmt.Errorf("ops listener: %w", err)
	}
	r.ops = ln
	return r, nil
}

// OpsAddr is the address /healthz, /readyz and /metrics are served on.
func (r *Runner) OpsAddr() string { return r.ops.Addr().String() }

// Replica is the name this replica reports under (Config.Replica, or the host name).
func (r *Runner) Replica() string { return r.cfg.Replica }

// API is the authenticated, counted reader of hyperfleet-api that reconcilers use to read what they depend on.
func (r *Runner) API() *API { return r.api }

// Referenced returns the live resource of kind named name as a Dependents source of this runner last saw it, with
// the followed report data: as of its last event (or at most one poll interval old with the poll source), and
// updated before the resources naming it are re-queued, so a reconcile that a change woke sees the change. ok is
// false when no Dependents follows kind or it has not seen the name yet; read the API then.
func (r *Runner) Referenced(kind *Kind, name string) (Reference, bool) {
	for _, d := range r.dependents {
		if d.dep.Kind.Plural == kind.Plural {
			if ref, ok := d.lookup(name); ok {
				return ref, true
			}
		}
	}
	return Reference{}, false
}

// Wake queues a resource of kind for a reconcile now, whatever it was scheduled for, if it is in this replica's
// shard; it reports whether it did. An adapter calls it when its external system tells it something changed (a
// Kubernetes watch event on an object it manages), so that it need not poll the system for progress. It may be
// called before Run; the key waits in the queue until then.
func (r *Runner) Wake(kind *Kind, parentID, id string) bool {
	if !r.owns(id) {
		return false
	}
	key := Key{Kind: kind.Plural, ID: id, ParentID: parentID}
	r.held.unkeep(key)
	r.queue.wake(key)
	return true
}

// ExternalTransport wraps base (nil: http.DefaultTransport) so that calls to the external system are counted in
// the adapter's metrics and logged at debug level. Build the reconciler's external clients with it.
func (r *Runner) ExternalTransport(system string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &externalTransport{system: system, base: base, metrics: r.metrics, log: r.log,
		reached: func(system string, reached bool, detail string) {
			r.health.called(system, r.clock.Now(), reached, detail)
		}}
}

// Registerer registers an adapter's own metrics, served on /metrics beside the runtime's; every series it
// registers carries the adapter label, as the runtime's do.
func (r *Runner) Registerer() prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{"adapter": r.cfg.Adapter}, r.registry)
}

// Run works until ctx ends, then stops its sources, lets in-flight reconciles finish within the drain timeout and
// returns nil. It returns an error only when it cannot start: no controller, a controller without a kind or a
// reconciler, two controllers of one kind, or replicas configured with different shard counts.
func (r *Runner) Run(ctx context.Context, controllers ...Controller) error {
	byKind, err := checkControllers(controllers)
	if err != nil {
		_ = r.ops.Close()
		return err
	}
	r.started = r.clock.Now()
	for _, c := range controllers {
		if err := r.checkShards(ctx, c.Kind); err != nil {
			_ = r.ops.Close()
			return err
		}
	}
	stopLeases := r.startShardLeases(ctx, controllers)
	opsSrv := &http.Server{Handler: r.opsHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := opsSrv.Serve(r.ops); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("ops server stopped", slog.Any("error", err))
		}
	}()
	polls := make([]source, 0, len(controllers))
	feeds := make([]feedHandler, 0, len(controllers))
	kinds := make([]string, 0, len(controllers))
	for _, c := range controllers {
		kinds = append(kinds, c.Kind.Plural)
		pending := &pendingSource{r: r, kind: c.Kind}
		polls, feeds = append(polls, pending), append(feeds, pending)
		for _, dep := range c.Dependents {
			d := newDependentsSource(r, c.Kind, dep)
			r.dependents = append(r.dependents, d)
			polls, feeds = append(polls, d), append(feeds, d)
		}
	}
	r.log.Info("adapter started", slog.String("api", r.cfg.APIURL), slog.Any("kinds", kinds), slog.Int("workers", r.cfg.Workers),
		slog.Int("shard_index", r.cfg.ShardIndex), slog.Int("shard_count", r.cfg.ShardCount), slog.String("source", r.cfg.Source),
		slog.Duration("poll_interval", r.cfg.PollInterval), slog.Duration("resync_after", r.cfg.ResyncAfter),
		slog.String("ops", r.OpsAddr()))

	// Reconciles run on their own context: SIGTERM stops new work at once but cancels running work only when the
	// drain deadline passes.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var workers sync.WaitGroup
	for w := range r.cfg.Workers {
		workers.Go(func() { r.work(workCtx, w, byKind) })
	}
	var events sync.WaitGroup
	switch r.cfg.Source {
	case SourceWatch:
		// Each feed lists before it watches: that is the first poll, so the poll loop's first turn waits an interval.
		for _, f := range feeds {
			w := &watchSource{r: r, feed: f}
			events.Go(func() { w.run(ctx) })
		}
		r.pollLoop(ctx, polls, false)
	case SourceNATS:
		nc, err := connectNATS(r.cfg, r.log)
		if err != nil {
			r.log.Error("cannot use NATS; polling only", slog.Any("error", err))
			r.pollLoop(ctx, polls, true)
			break
		}
		defer nc.Close()
		if err := r.startNATS(ctx, nc, feeds, &events); err != nil {
			r.log.Error("cannot use NATS; polling only", slog.Any("error", err))
		}
		r.pollLoop(ctx, polls, true)
	default:
		r.pollLoop(ctx, polls, true)
	}
	events.Wait()

	r.stopping.Store(true)
	r.log.Info("draining", slog.Duration("deadline", r.cfg.DrainTimeout))
	r.queue.ShutDown()
	drained := make(chan struct{})
	go func() { workers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-r.clock.After(r.cfg.DrainTimeout):
		r.log.Warn("drain deadline passed: cancelling in-flight reconciles")
		cancelWork()
		<-drained
	}
	stopLeases()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := opsSrv.Shutdown(shutdownCtx); err != nil {
		r.log.Warn("ops server did not shut down cleanly", slog.Any("error", err))
	}
	r.log.Info("adapter stopped")
	return nil
}

func checkControllers(controllers []Controller) (map[string]Controller, error) {
	if len(controllers) == 0 {
		return nil, errors.New("adapter: no controller to run")
	}
	byKind := make(map[string]Controller, len(controllers))
	for _, c := range controllers {
		switch {
		case c.Kind == nil || c.Kind.Plural == "":
			return nil, errors.New("adapter: a controller has no kind")
		case c.Reconciler == nil:
			return nil, fmt.Errorf("adapter: the %s controller has no reconciler", c.Kind.Name)
		}
		if _, dup := byKind[c.Kind.Plural]; dup {
			return nil, fmt.Errorf("adapter: two controllers for %s", c.Kind.Name)
		}
		for _, dep := range c.Dependents {
			if err := dep.checkFor(c.Kind); err != nil {
				return nil, fmt.Errorf("adapter: the %s controller: %w", c.Kind.Name, err)
			}
		}
		byKind[c.Kind.Plural] = c
	}
	return byKind, nil
}

// source finds keys that need a reconcile and offers them to the queue; the poll loop runs each in turn.
type source interface {
	// poll looks once; an error means it could not look at all (it has logged why).
	poll(ctx context.Context) error
}

// pollLoop runs every source every interval until ctx ends, the first time at once when now is set.
func (r *Runner) pollLoop(ctx context.Context, sources []source, now bool) {
	ticker := r.clock.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	if !now {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
	for {
		failed := false
		for _, s := range sources {
			if err := s.poll(ctx); err != nil {
				failed = true
			}
		}
		if !failed {
			r.metrics.lastPoll.Set(float64(r.clock.Now().Unix()))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// startNATS starts a NATS source per kind that a feed follows. Each creates its consumer before it returns (or
// fails to, and keeps trying in the background), so that the first poll, which runs after it, and the consumers
// together miss nothing.
func (r *Runner) startNATS(ctx context.Context, nc *nats.Conn, feeds []feedHandler, running *sync.WaitGroup) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	byKind := map[string][]feedHandler{}
	var order []*Kind
	for _, f := range feeds {
		k := f.feedKind()
		if _, ok := byKind[k.Plural]; !ok {
			order = append(order, k)
		}
		byKind[k.Plural] = append(byKind[k.Plural], f)
	}
	for _, k := range order {
		s := newNATSSource(r, js, k, byKind[k.Plural])
		// Bounded: an unreachable NATS must not hold back the poll, which works without it.
		ensureCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.ensure(ensureCtx)
		cancel()
		if err != nil {
			s.log.Warn("cannot consume relayed events yet; will retry (the poll goes on meanwhile)", slog.Any("error", err))
		}
		running.Go(func() { s.run(ctx) })
	}
	return nil
}

// work is worker w's loop.
func (r *Runner) work(ctx context.Context, w int, byKind map[string]Controller) {
	for {
		key, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		r.health.took(w, r.clock.Now())
		c, served := byKind[key.Kind]
		if !served {
			r.log.Error("a key of a kind no controller serves was queued; dropped", slog.String("kind", key.Kind), slog.String("id", key.ID))
		} else if !r.stopping.Load() {
			r.queue.started(key)
			r.process(ctx, c, key)
			r.queue.finished(key)
		}
		r.health.done(w)
		r.queue.Done(key)
	}
}

// Results of one reconcile, as counted in metrics.
const (
	resultSuccess   = "success"
	resultTransient = "transient_error"
	resultTerminal  = "terminal_error"
	resultPanic     = "panic"
	resultGone      = "gone"
	resultNoReport  = "not_reported"
	resultStale     = "stale"  // the API already holds a newer report: this one was dropped
	resultPaused    = "paused" // spec.paused: the reconciler was not called
)

// process reconciles one key: fresh fetch, Reconcile or Finalize, one status post, and the next schedule.
func (r *Runner) process(ctx context.Context, c Controller, key Key) {
	kind, rec := c.Kind, c.Reconciler
	start := r.clock.Now()
	log := r.log.With(slog.String("kind", kind.Name), slog.String("id", key.ID))
	// Taken first, so that whatever happens next no held copy outlives the reconcile its event queued.
	event := r.held.take(key)
	ctx, endLease, lease, leased := r.leaseWork(ctx, key.ID)
	defer endLease()
	if !leased {
		r.queue.settle(key) // its shard moved to another replica, which re-checks it
		return
	}
	obj, err := r.fetch(ctx, c, key, event)
	if err != nil {
		r.apiFailed(log, kind, key, 0, "fetch", err)
		return
	}
	r.queue.fetched(key, obj.Generation)
	if c.KeepObject {
		r.held.keep(key, obj)
	}
	log = log.With(slog.Int64("generation", obj.Generation))
	finalizing := obj.DeletedTime != nil
	metadata := map[string]any{"replica": r.cfg.Replica, "shard_index": r.cfg.ShardIndex, "shard_count": r.cfg.ShardCount}
	for k, v := range r.cfg.Agreed {
		metadata[k] = v
	}
	lease.stamp(metadata)
	var (
		out    Outcome
		recErr error
		report api.AdapterStatusReport
	)
	// A paused resource is not handed to the reconciler at all; a deleting one always is, since a delete is the
	// user's later and stronger word (and a deleting resource's spec can no longer be unpaused).
	paused := !finalizing && Paused(obj)
	if paused {
		report = pausedReport(r.cfg.Adapter, obj, r.clock.Now(), metadata)
	} else {
		out, recErr = r.call(ctx, rec, obj, finalizing)
		report = buildReport(r.cfg.Adapter, obj, out, recErr, finalizing, r.clock.Now(), metadata)
	}
	report, invalid := checked(report, r.clock.Now())
	if invalid != nil {
		log.Error("the reconciler's outcome makes a report the API refuses; reporting that instead", slog.Any("error", invalid))
		if recErr == nil {
			recErr = Transient(conditions.ReasonInvalidReport, invalid)
		}
	}
	if r.reports.unchanged(key, report, r.clock.Now(), r.heartbeat()) {
		r.metrics.unchangedReports.WithLabelValues(kind.Name).Inc()
	} else if err := r.putStatus(ctx, kind, key, report); err != nil {
		r.reports.forget(key)
		if isStale(err) || isLeaseLost(err) {
			// A newer generation was reported on already (or is being); the next poll brings it if needed.
			log.Debug("report was stale; dropped")
			r.metrics.reconciles.WithLabelValues(kind.Name, resultStale).Inc()
			r.queue.settle(key)
			return
		}
		r.apiFailed(log, kind, key, obj.Generation, "post status", err)
		return
	} else {
		r.reports.posted(key, report, r.clock.Now())
	}
	r.metrics.reconcileSeconds.WithLabelValues(kind.Name).Observe(r.clock.Since(start).Seconds())
	result := resultSuccess
	switch {
	case paused:
		result = resultPaused
		r.queue.settle(key) // nothing to follow up: the unpausing patch is a new generation
	case recErr == nil:
		r.queue.settle(key)
		if out.RequeueAfter > 0 {
			r.queue.schedule(key, out.RequeueAfter, obj.Generation)
		}
	case errors.Is(recErr, ErrTerminal):
		result = resultTerminal
		r.queue.settle(key) // retrying cannot help: wait for a new generation
	default:
		result = resultTransient
		if errorReason(recErr) == conditions.ReasonReconcilerPanic {
			result = resultPanic
		}
		delay := r.queue.backoff(key)
		if out.RequeueAfter > 0 {
			delay = out.RequeueAfter
		}
		r.queue.schedule(key, delay, obj.Generation)
	}
	r.metrics.reconciles.WithLabelValues(kind.Name, result).Inc()
	level := slog.LevelDebug
	if recErr != nil {
		level = slog.LevelWarn
	} else if changed(obj.LastReport, report.Conditions) {
		level = slog.LevelInfo
	}
	attrs := []slog.Attr{slog.String("result", result), slog.Bool("finalizing", finalizing), slog.Duration("duration", r.clock.Since(start))}
	for _, c := range report.Conditions {
		attrs = append(attrs, slog.String(c.Type, string(c.Status)+"/"+deref(c.Reason)))
	}
	if recErr != nil {
		attrs = append(attrs, slog.Any("error", recErr))
	}
	log.LogAttrs(ctx, level, "reconciled", attrs...)
}

// fetch reads the resource (unless held, the copy the event that queued this reconcile brought), its parent and
// the adapter's last report: from the cache of what this replica posted when it has it, as none when the
// resource's aggregated status says the adapter never reported, else from the API.
func (r *Runner) fetch(ctx context.Context, c Controller, key Key, held *Object) (*Object, error) {
	kind := c.Kind
	obj := held
	if obj == nil && c.KeepObject {
		obj = r.held.takeKept(key)
	}
	if obj != nil {
		r.metrics.heldReads.WithLabelValues(kind.Name).Inc()
	} else {
		var err error
		if obj, err = r.api.Get(ctx, kind, key.ParentID, key.ID); err != nil {
			return nil, err
		}
	}
	var err error
	if kind.Parent != nil {
		if obj.Parent = r.parents.get(key.ParentID, r.clock.Now(), c.ParentMaxAge); obj.Parent == nil {
			if obj.Parent, err = r.api.Get(withOp(ctx, "get parent"), kind.Parent, "", key.ParentID); err != nil {
				return nil, err
			}
			if c.ParentMaxAge > 0 {
				r.parents.put(key.ParentID, obj.Parent, r.clock.Now(), c.ParentMaxAge)
			}
		}
	}
	if obj.LastReport = r.reports.get(key); obj.LastReport != nil || neverReported(obj, r.cfg.Adapter) {
		return obj, nil
	}
	if obj.LastReport, err = r.api.Report(ctx, kind, key.ParentID, key.ID, r.cfg.Adapter); err != nil {
		return nil, err
	}
	return obj, nil
}

// heartbeat is how long a report that says what the last one said goes unposted: ReportHeartbeat, or ResyncAfter
// when that is shorter, since the poll lists a resource whose report is older than ResyncAfter again and again
// until a post moves its report time.
func (r *Runner) heartbeat() time.Duration {
	if r.cfg.ResyncAfter > 0 {
		return min(r.cfg.ReportHeartbeat, r.cfg.ResyncAfter)
	}
	return r.cfg.ReportHeartbeat
}

// putStatus stores the adapter's report (PUT is idempotent, so a retry after a lost answer is harmless).
func (r *Runner) putStatus(ctx context.Context, kind *Kind, key Key, report api.AdapterStatusReport) error {
	ref, err := parseRef(kind, key.ParentID, key.ID)
	if err != nil {
		return err
	}
	return r.api.putStatus(withOp(ctx, "put status"), kind, ref, report)
}

// apiFailed handles a failed API call of a reconcile: a resource that is gone is forgotten, anything else is
// retried with backoff (a 401/403 may heal when the token file is rotated).
func (r *Runner) apiFailed(log *slog.Logger, kind *Kind, key Key, generation int64, what string, err error) {
	if errors.Is(err, ErrNotFound) {
		r.reports.forget(key)
		r.queue.settle(key)
		r.metrics.reconciles.WithLabelValues(kind.Name, resultGone).Inc()
		log.Debug("resource is gone", slog.String("during", what))
		return
	}
	r.metrics.reconciles.WithLabelValues(kind.Name, resultNoReport).Inc()
	level := slog.LevelWarn
	if !retryable(err) {
		level = slog.LevelError
	}
	log.Log(context.Background(), level, "API call failed; will retry", slog.String("during", what), slog.Any("error", err))
	r.queue.retry(key, generation)
}

// call runs Reconcile or Finalize under the reconcile timeout and turns a panic into a transient error.
func (r *Runner) call(ctx context.Context, rec Reconciler, obj *Object, finalizing bool) (out Outcome, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReconcileTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("reconciler panicked", slog.String("kind", obj.Kind), slog.String("id", obj.ID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out, err = Outcome{}, Transient(conditions.ReasonReconcilerPanic, fmt.Errorf("reconciler panicked: %v", p))
		}
	}()
	if finalizing {
		return rec.Finalize(ctx, obj)
	}
	return rec.Reconcile(ctx, obj)
}
