// Package feed is the change feed as one process serves it: one goroutine follows the stored, sequenced log
// (resource.EventLog) and keeps the latest events in memory, and any number of readers (watches, the NATS relay)
// pull from there. It is infrastructure, not domain: the domain package declares the events and the log.
package feed

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Feed fans the change feed out to any number of readers in one process. One goroutine (Run) follows the log,
// woken by wake, and keeps the latest events in memory; readers pull from there at their own pace, or from the
// log when they fall behind the memory, so a slow reader costs nothing to the others and holds no buffer.
type Feed struct {
	log    resource.EventLog
	wake   <-chan struct{}
	recent int

	mu      sync.Mutex
	head    int64
	ring    []resource.Event // the latest events, oldest first, at most recent of them
	changed chan struct{}    // closed and replaced when head moves
}

// feedPoll is how often Run reads the log without being woken: the safety net for a lost notification.
const feedPoll = time.Second

// New returns a feed over log, woken by wake (which may be nil), keeping the latest recent events in memory.
func New(log resource.EventLog, wake <-chan struct{}, recent int) *Feed {
	if recent < 1 {
		recent = 4096
	}
	return &Feed{log: log, wake: wake, recent: recent, changed: make(chan struct{})}
}

// Start reads the log's head, so that Head is right before Run has run.
func (f *Feed) Start(ctx context.Context) error {
	head, err := f.log.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the change feed's head: %w", err)
	}
	f.mu.Lock()
	f.head = head
	f.mu.Unlock()
	return nil
}

// Run follows the log until ctx ends. A failed read is retried on the next wake or poll.
func (f *Feed) Run(ctx context.Context) error {
	tick := time.NewTicker(feedPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		case <-tick.C:
		}
		_ = f.catchUp(ctx) //nolint:errcheck // retried on the next wake or tick; readers see the feed stand still
	}
}

func (f *Feed) catchUp(ctx context.Context) error {
	for {
		f.mu.Lock()
		head := f.head
		f.mu.Unlock()
		events, err := f.log.Events(ctx, head, 1000)
		if err != nil || len(events) == 0 {
			return err
		}
		f.mu.Lock()
		f.ring = append(f.ring, events...)
		if over := len(f.ring) - f.recent; over > 0 {
			f.ring = append(f.ring[:0:0], f.ring[over:]...)
		}
		f.head = events[len(events)-1].Seq
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		if len(events) < 1000 {
			return nil
		}
	}
}

// Head returns the latest sequence the feed has seen. Every change it names is committed, so a list read after
// Head returned shows it: listing and then watching from Head misses nothing.
func (f *Feed) Head() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head
}

// Check returns resource.ErrExpired if a reader at after has missed events that retention removed.
func (f *Feed) Check(ctx context.Context, after int64) error {
	compacted, err := f.log.CompactedThrough(ctx)
	if err != nil {
		return err
	}
	if after < compacted {
		return fmt.Errorf("%w: position %d, events up to %d were removed", resource.ErrExpired, after, compacted)
	}
	return nil
}

// Next returns up to limit events after after, in order, waiting until there is one or ctx ends.
func (f *Feed) Next(ctx context.Context, after int64, limit int) ([]resource.Event, error) {
	for {
		f.mu.Lock()
		head, changed := f.head, f.changed
		var out []resource.Event
		fromMemory := len(f.ring) > 0 && f.ring[0].Seq <= after+1
		if after < head && fromMemory {
			for _, e := range f.ring {
				if e.Seq > after {
					out = append(out, e)
					if len(out) == limit {
						break
					}
				}
			}
		}
		f.mu.Unlock()
		switch {
		case len(out) > 0:
			return out, nil
		case after < head && !fromMemory:
			// Behind what memory holds: read the log, which also tells when the reader fell behind retention.
			if err := f.Check(ctx, after); err != nil {
				return nil, err
			}
			events, err := f.log.Events(ctx, after, limit)
			if err != nil || len(events) > 0 {
				return events, err
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
