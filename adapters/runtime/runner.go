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

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Runner runs one adapter: the poll source, the queue, the workers and the ops endpoints.
type Runner struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.WithTicker
	client   *apiClient
	queue    *workQueue
	metrics  *metrics
	registry *prometheus.Registry
	ops      net.Listener
	started  time.Time

	lastPoll atomic.Int64 // unix nanoseconds of the last successful poll; 0 before the first
	stopping atomic.Bool
}

// New checks cfg, reads the token file and binds the ops listener; Run starts the work. log should carry no
// attributes of its own: the runner adds adapter and kind.
func New(cfg Config, log *slog.Logger) (*Runner, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Replica == "" {
		cfg.Replica, _ = os.Hostname()
	}
	r := &Runner{cfg: cfg, clock: cfg.Clock, registry: prometheus.NewRegistry(),
		log: log.With(slog.String("adapter", cfg.Adapter), slog.String("kind", cfg.Kind.Name))}
	r.queue = newWorkQueue(newJitteredBackoff(cfg.BackoffBase, cfg.BackoffMax, nil), cfg.Clock)
	r.metrics = newMetrics(r.registry, cfg.Adapter, cfg.Kind.Name, func() float64 { return float64(r.queue.Len()) })
	r.client = &apiClient{base: cfg.apiBase(), metrics: r.metrics,
		hc: &http.Client{Timeout: 30 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	if cfg.TokenFile != "" {
		tok, err := newTokenFile(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		r.client.token = tok
	}
	ln, err := net.Listen("tcp", cfg.OpsBindAddress)
	if err != nil {
		return nil, fmt.Errorf("ops listener: %w", err)
	}
	r.ops = ln
	return r, nil
}

// OpsAddr is the address /healthz, /readyz and /metrics are served on.
func (r *Runner) OpsAddr() string { return r.ops.Addr().String() }

// ExternalTransport wraps base (nil: http.DefaultTransport) so that calls to the external system are counted in
// the adapter's metrics and logged at debug level. Build the reconciler's external clients with it.
func (r *Runner) ExternalTransport(system string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &externalTransport{system: system, base: base, metrics: r.metrics, log: r.log}
}

// Run works until ctx ends, then stops polling, lets in-flight reconciles finish within the drain timeout and
// returns nil. It returns an error only when it cannot start: a nil reconciler, or replicas configured with
// different shard counts.
func (r *Runner) Run(ctx context.Context, rec Reconciler) error {
	if rec == nil {
		return errors.New("adapter: no reconciler")
	}
	r.started = r.clock.Now()
	if err := r.checkShards(ctx); err != nil {
		_ = r.ops.Close()
		return err
	}
	opsSrv := &http.Server{Handler: r.opsHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := opsSrv.Serve(r.ops); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("ops server stopped", slog.Any("error", err))
		}
	}()
	r.log.Info("adapter started", slog.String("api", r.client.base), slog.Int("workers", r.cfg.Workers),
		slog.Int("shard_index", r.cfg.ShardIndex), slog.Int("shard_count", r.cfg.ShardCount),
		slog.Duration("poll_interval", r.cfg.PollInterval), slog.Duration("resync_after", r.cfg.ResyncAfter),
		slog.String("ops", r.OpsAddr()))

	// Reconciles run on their own context: SIGTERM stops new work at once but cancels running work only when the
	// drain deadline passes.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var workers sync.WaitGroup
	for range r.cfg.Workers {
		workers.Go(func() { r.work(workCtx, rec) })
	}
	r.pollLoop(ctx)

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
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = opsSrv.Shutdown(shutdownCtx)
	r.log.Info("adapter stopped")
	return nil
}

// pollLoop polls at once and then every interval until ctx ends.
func (r *Runner) pollLoop(ctx context.Context) {
	ticker := r.clock.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	for {
		r.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// poll pages through the pending resources of this replica's shard and offers their keys to the queue. Pages
// go by id (keyset), so resources that stop being pending while it pages do not make it skip others.
func (r *Runner) poll(ctx context.Context) {
	added, seen, after := 0, 0, ""
	for {
		keys, more, err := r.client.pending(ctx, r.cfg.Kind, r.cfg.Adapter, r.cfg.ResyncAfter, after, r.cfg.PageSize)
		if err != nil {
			if ctx.Err() == nil {
				r.metrics.polls.WithLabelValues("error").Inc()
				r.log.Warn("poll failed", slog.Any("error", err))
			}
			return
		}
		for _, k := range keys {
			if shardOf(k.ID, r.cfg.ShardCount) != r.cfg.ShardIndex {
				continue
			}
			seen++
			if r.queue.offer(k.Key, k.Generation) {
				added++
			}
		}
		if !more || len(keys) == 0 {
			break
		}
		after = keys[len(keys)-1].ID
	}
	now := r.clock.Now()
	r.lastPoll.Store(now.UnixNano())
	r.metrics.polls.WithLabelValues("success").Inc()
	r.metrics.lastPoll.Set(float64(now.Unix()))
	if added > 0 {
		r.log.Debug("poll", slog.Int("pending", seen), slog.Int("queued", added))
	}
}

func (r *Runner) work(ctx context.Context, rec Reconciler) {
	for {
		key, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		if !r.stopping.Load() {
			r.queue.started(key)
			r.process(ctx, rec, key)
			r.queue.finished(key)
		}
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
	resultStale     = "stale" // the API already holds a newer report: this one was dropped
)

// process reconciles one key: fresh fetch, Reconcile or Finalize, one status post, and the next schedule.
func (r *Runner) process(ctx context.Context, rec Reconciler, key Key) {
	start := r.clock.Now()
	log := r.log.With(slog.String("id", key.ID))
	obj, err := r.fetch(ctx, key)
	if err != nil {
		r.apiFailed(log, key, 0, "fetch", err)
		return
	}
	r.queue.fetched(key, obj.Generation)
	log = log.With(slog.Int64("generation", obj.Generation))
	finalizing := obj.DeletedTime != nil
	out, recErr := r.call(ctx, rec, obj, finalizing)
	report := buildReport(r.cfg.Adapter, obj, out, recErr, finalizing, r.clock.Now(),
		map[string]any{"replica": r.cfg.Replica, "shard_index": r.cfg.ShardIndex, "shard_count": r.cfg.ShardCount})
	report, invalid := checked(report, r.clock.Now())
	if invalid != nil {
		log.Error("the reconciler's outcome makes a report the API refuses; reporting that instead", slog.Any("error", invalid))
		if recErr == nil {
			recErr = Transient(ReasonInvalidReport, invalid)
		}
	}
	if err := r.client.putStatus(ctx, r.cfg.Kind, key, report); err != nil {
		if isStale(err) {
			// A newer generation was reported on already (or is being); the next poll brings it if needed.
			log.Debug("report was stale; dropped")
			r.metrics.reconciles.WithLabelValues(resultStale).Inc()
			r.queue.settle(key)
			return
		}
		r.apiFailed(log, key, obj.Generation, "post status", err)
		return
	}
	r.metrics.reconcileSeconds.Observe(r.clock.Since(start).Seconds())
	result := resultSuccess
	switch {
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
		if errorReason(recErr) == ReasonReconcilerPanic {
			result = resultPanic
		}
		delay := r.queue.backoff(key)
		if out.RequeueAfter > 0 {
			delay = out.RequeueAfter
		}
		r.queue.schedule(key, delay, obj.Generation)
	}
	r.metrics.reconciles.WithLabelValues(result).Inc()
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

// fetch reads the resource, its parent and the adapter's last report.
func (r *Runner) fetch(ctx context.Context, key Key) (*Object, error) {
	obj, err := r.client.get(ctx, r.cfg.Kind, key)
	if err != nil {
		return nil, err
	}
	if obj.LastReport, err = r.client.lastReport(ctx, r.cfg.Kind, key, r.cfg.Adapter); err != nil {
		return nil, err
	}
	return obj, nil
}

// apiFailed handles a failed API call of a reconcile: a resource that is gone is forgotten, anything else is
// retried with backoff (a 401/403 may heal when the token file is rotated).
func (r *Runner) apiFailed(log *slog.Logger, key Key, generation int64, what string, err error) {
	if isStatus(err, http.StatusNotFound) {
		r.queue.settle(key)
		r.metrics.reconciles.WithLabelValues(resultGone).Inc()
		log.Debug("resource is gone", slog.String("during", what))
		return
	}
	r.metrics.reconciles.WithLabelValues(resultNoReport).Inc()
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
			r.log.Error("reconciler panicked", slog.String("id", obj.ID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out, err = Outcome{}, Transient(ReasonReconcilerPanic, fmt.Errorf("reconciler panicked: %v", p))
		}
	}()
	if finalizing {
		return rec.Finalize(ctx, obj)
	}
	return rec.Reconcile(ctx, obj)
}
