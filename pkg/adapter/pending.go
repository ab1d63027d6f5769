package adapter

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// pendingSource finds one kind's pending resources in this replica's shard and offers their keys to the queue: by
// polling (keyset pages, following the API's next cursor, so that resources that stop being pending while it
// pages do not make it skip others), and as the feedHandler of a watch or NATS source.
type pendingSource struct {
	r    *Runner
	kind *Kind
	// rechecked is set once a list has offered every resource reported on before this process started: work a
	// previous process left in progress (a device mid-reload, a control plane coming up) is looked at again at
	// once rather than after ResyncAfter, as a controller's first list does.
	rechecked atomic.Bool
}

var (
	_ source      = (*pendingSource)(nil)
	_ feedHandler = (*pendingSource)(nil)
)

// startupRecheck is the resync age of the first list: every report but those of the last second, which this
// process made itself.
const startupRecheck = time.Second

func (s *pendingSource) poll(ctx context.Context) error {
	_, err := s.list(ctx)
	return err
}

func (s *pendingSource) feedKind() *Kind { return s.kind }

// query is the list of pending work: what the adapter has not reported on at the current generation, a deleting
// resource it has not finalized, or (with ResyncAfter) a report older than that.
func (s *pendingSource) query() listQuery {
	return listQuery{pendingFor: s.r.cfg.Adapter, resyncAfter: s.r.cfg.ResyncAfter, includeDeleted: true}
}

func (s *pendingSource) watchQuery() listQuery {
	q := s.query()
	// The event carries the resource as the API read it to send the event, which the reconcile it queues takes
	// in place of a read of its own.
	q.fields = heldFields
	return q
}

// list pages through the pending resources and offers those of this replica's shard; it returns the position of
// its first page, which every later change is after.
func (s *pendingSource) list(ctx context.Context) (string, error) {
	r := s.r
	added, seen, after, position := 0, 0, "", ""
	recheck := r.cfg.ResyncAfter > 0 && !s.rechecked.Load()
	for {
		q := s.query()
		if recheck {
			q.resyncAfter = startupRecheck
		}
		q.fields, q.size, q.order, q.after = "id,generation,owner_references", r.cfg.PageSize, "id", after
		page, err := r.api.list(withOp(ctx, "list pending"), s.kind, "", q)
		if err != nil {
			if ctx.Err() == nil {
				r.metrics.polls.WithLabelValues(s.kind.Name, "error").Inc()
				r.log.Warn("poll failed", slog.String("kind", s.kind.Name), slog.Any("error", err))
			}
			return "", err
		}
		if after == "" {
			position = page.position
		}
		for _, it := range page.items {
			if !r.owns(it.ID) {
				continue
			}
			r.held.unkeep(it.Key)
			seen++
			if r.queue.offer(it.Key, it.Generation) {
				added++
			}
		}
		if page.next == "" {
			break
		}
		after = page.next
	}
	r.metrics.polls.WithLabelValues(s.kind.Name, "success").Inc()
	if recheck && s.rechecked.CompareAndSwap(false, true) {
		r.log.Info("re-checking every resource of the shard once after start", slog.String("kind", s.kind.Name), slog.Int("queued", added))
	}
	r.listed.Store(true)
	r.contact()
	if added > 0 {
		r.log.Debug("poll", slog.String("kind", s.kind.Name), slog.Int("pending", seen), slog.Int("queued", added))
	}
	return position, nil
}

// handle offers an event's resource, when it is in this replica's shard and pending, or forgets a removed one.
func (s *pendingSource) handle(ctx context.Context, e *feedEvent) error {
	r := s.r
	key := e.key(s.kind)
	if e.Type == api.WatchEventTypeRemoved {
		r.forget(key)
		return nil
	}
	if e.Type == api.WatchEventTypeLeft {
		return nil // the watch's pending_for says the adapter has nothing left to do on it
	}
	if !r.owns(key.ID) {
		return nil
	}
	r.held.unkeep(key) // whatever the event is about, a kept copy may no longer show it
	if !e.filtered {
		pending, err := s.pending(ctx, e, key)
		if err != nil || !pending {
			return err
		}
	}
	// Held before it is offered, so that a worker that takes the key at once finds it; let go of when the offer
	// queued nothing, so that no later reconcile takes a copy its own event did not bring.
	obj, err := objectOf(s.kind, &e.WatchEvent)
	if err != nil || (obj != nil && obj.Generation < e.Generation) {
		obj = nil // the reconcile reads the resource instead
	}
	if obj != nil {
		r.held.put(key, obj)
	}
	if !r.queue.offer(key, e.Generation) && obj != nil {
		r.held.drop(key, obj)
	}
	return nil
}

// pending decides what a watch's pending_for filter decides for an event that came unfiltered (NATS): whether
// the adapter has work on the resource. Its own last report answers most events: an adapter's report at the event's
// generation (its own, another adapter's) or a label change leave it with nothing to do. Otherwise the API is
// asked, with the poll's filters, about this one resource.
func (s *pendingSource) pending(ctx context.Context, e *feedEvent, key Key) (bool, error) {
	if e.Type == api.WatchEventTypeCreated || e.Type == api.WatchEventTypeDeleting {
		return true, nil // nobody has reported on a new generation yet
	}
	// Labels, or some adapter's report (removed events never get here): pending only if this adapter has not
	// reported at this generation.
	if rep := s.r.reports.get(key); rep != nil && rep.ObservedGeneration >= e.Generation {
		return false, nil
	}
	q := s.query()
	q.search, q.fields, q.size = "id = '"+key.ID+"'", "id,owner_references", 1
	page, err := s.r.api.list(withOp(ctx, "check pending"), s.kind, "", q)
	return len(page.items) > 0, err
}
