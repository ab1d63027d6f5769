package adapter

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// feedHandler is what follows one kind's change feed: a controller's pending work (pendingSource) or a Dependents'
// referenced kind (dependentsSource). The watch source and the NATS source deliver events to it; the poll calls
// its list.
type feedHandler interface {
	// feedKind is the kind whose events the handler takes.
	feedKind() *Kind
	// list reads the present as the poll does and returns the change feed position the list reflects: a watch
	// started after it misses nothing.
	list(ctx context.Context) (position string, err error)
	// watchQuery is the list query a watch of the feed filters with (pending_for, resync_after, fields).
	watchQuery() listQuery
	// handle acts on one event of the kind. An error means the event's work is not done: the watch lists again,
	// NATS delivers the message again.
	handle(ctx context.Context, e *feedEvent) error
}

// feedEvent is one change as a source delivered it.
type feedEvent struct {
	api.WatchEvent
	// filtered says the API applied the feed's list filters (a watch with pending_for); NATS relays every event of
	// the kind, and without the resource (Object is then nil).
	filtered bool
}

// key returns the event's resource as a queue key of kind.
func (e *feedEvent) key(kind *Kind) Key {
	k := Key{Kind: kind.Plural, ID: e.Id.String()}
	if e.ParentId != nil {
		k.ParentID = e.ParentId.String()
	}
	return k
}

// received counts an event of kind from source, its lag and the position it brings the source to.
func (r *Runner) received(source string, kind *Kind, e *api.WatchEvent) {
	typ := string(e.Type)
	switch e.Type {
	case api.WatchEventTypeCreated, api.WatchEventTypeUpdated, api.WatchEventTypeStatus, api.WatchEventTypeDeleting, api.WatchEventTypeRemoved,
		api.WatchEventTypeLeft:
	default:
		typ = "other" // the label's values stay a closed set whatever the server sends
	}
	r.metrics.events.WithLabelValues(source, kind.Name, typ).Inc()
	// The event's time is the API's wall clock, so the lag is measured on this process's wall clock, not r.clock
	// (which tests may fake).
	r.metrics.eventLag.WithLabelValues(source).Observe(max(0, time.Since(e.Time).Seconds()))
	r.metrics.feedPosition.WithLabelValues(source, kind.Name).Set(float64(e.Seq))
}

// reached records a listed position of kind's feed for source.
func (r *Runner) reached(source string, kind *Kind, position string) {
	if n, err := strconv.ParseInt(position, 10, 64); err == nil {
		r.metrics.feedPosition.WithLabelValues(source, kind.Name).Set(float64(n))
	}
}

// forget drops what the runtime keeps about a removed resource: its cached report, its schedule and its failures.
func (r *Runner) forget(key Key) {
	r.reports.forget(key)
	r.held.forget(key)
	r.queue.settle(key)
}

// contact records that a source heard from the API (or NATS) just now, for /healthz.
func (r *Runner) contact() {
	r.lastContact.Store(r.clock.Now().UnixNano())
}

// maxSourceRetry bounds a source's wait between attempts: an API or NATS server that is back should be heard
// from within seconds, not after a reconcile's five-minute backoff.
const maxSourceRetry = 30 * time.Second

// retryDelay is how long a source waits after its n-th failure in a row (n ≥ 1): from the queue's backoff base,
// doubling, at most the queue's backoff max or maxSourceRetry, ±10 % jitter.
func (r *Runner) retryDelay(n int) time.Duration {
	ceiling := float64(min(r.cfg.BackoffMax, maxSourceRetry))
	d := ceiling
	if n >= 1 && n < 62 {
		d = math.Min(float64(r.cfg.BackoffBase)*math.Exp2(float64(n-1)), d)
	}
	d *= 1 + backoffJitter*(2*rand.Float64()-1) //nolint:gosec // jitter, not a secret
	return time.Duration(math.Min(d, ceiling))
}

// sleep waits d on the runner's clock; it returns false when ctx ended first.
func (r *Runner) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-r.clock.After(d):
		return true
	}
}
