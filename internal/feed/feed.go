// Package feed is the change feed as one process serves it: one goroutine follows the stored, sequenced log
// (resource.EventLog) and keeps the latest events in memory, and any number of readers (watches, the NATS relay)
// pull from there. It is infrastructure, not domain: the domain package declares the events and the log.
package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Feed fans the change feed out to any number of readers in one process. One goroutine (Run) follows the log,
// woken by wake, and keeps the latest events in memory; readers pull from there at their own pace, or from the
// log when they fall behind the memory, so a slow reader costs nothing to the others and holds no buffer.
//
// Positions carry the feed's epoch (resource.Position): a reader at a position of another epoch, or beyond the
// head for longer than the grace, is told resource.ErrOtherEpoch, never left waiting for numbers that the feed
// will hand out again to other events.
type Feed struct {
	log    resource.EventLog
	wake   <-chan struct{}
	recent int
	grace  time.Duration

	mu      sync.Mutex
	head    resource.Position
	ring    []resource.Event // the latest events, oldest first: at least recent of them once there are, at most twice
	changed chan struct{}    // closed and replaced when head moves
}

// feedPoll is how often Run reads the log without being woken: the safety net for a lost notification, and how
// soon a renewed epoch is noticed.
const feedPoll = time.Second

// DefaultGrace is how long a position beyond the head is waited for before it is refused: a position from a
// replica that is just ahead of this one (its feed read the log a moment earlier) still works.
const DefaultGrace = 5 * time.Second

// Config tunes a Feed.
type Config struct {
	// Recent is how many of the latest events are kept in memory (default 4096).
	Recent int
	// Grace is how long a position beyond the head is waited for (default DefaultGrace).
	Grace time.Duration
}

// New returns a feed over log, woken by wake (which may be nil).
func New(log resource.EventLog, wake <-chan struct{}, cfg Config) *Feed {
	if cfg.Recent < 1 {
		cfg.Recent = 4096
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	return &Feed{log: log, wake: wake, recent: cfg.Recent, grace: cfg.Grace, changed: make(chan struct{})}
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
		if errors.Is(err, resource.ErrExpired) {
			// The log was restored or failed over (another epoch), or this process fell behind retention: start
			// again at the log's head. Readers still at the old positions are told so by Next.
			return f.restart(ctx)
		}
		if err != nil || len(events) == 0 {
			return err
		}
		f.mu.Lock()
		f.ring = append(f.ring, events...)
		// Trimmed to recent only when it holds twice that: a trim copies the ring, and trimming on every catch-up
		// (one per write under load) made the copy the feed's main cost.
		if len(f.ring) >= 2*f.recent {
			f.ring = append(f.ring[:0:0], f.ring[len(f.ring)-f.recent:]...)
		}
		f.head.Seq = events[len(events)-1].Seq
		f.broadcast()
		f.mu.Unlock()
		if len(events) < 1000 {
			return nil
		}
	}
}

// restart moves the feed to the log's head, forgetting the events it kept.
func (f *Feed) restart(ctx context.Context) error {
	head, err := f.log.Head(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.head, f.ring = head, nil
	f.broadcast()
	return nil
}

// broadcast wakes every waiting reader; f.mu is held.
func (f *Feed) broadcast() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Head returns the latest position the feed has seen. Every change up to it is committed, so a list read after
// Head returned shows it: listing and then watching from Head misses nothing.
func (f *Feed) Head() resource.Position {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head
}

// Check returns resource.ErrExpired (wrapped) if a reader at after has missed events: retention removed them, the
// position is of another epoch, or it is beyond the head and stays so for the grace (it waits that long).
func (f *Feed) Check(ctx context.Context, after resource.Position) error {
	var deadline time.Time
	for {
		f.mu.Lock()
		head, changed := f.head, f.changed
		f.mu.Unlock()
		if err := f.ahead(after, head, &deadline); err != nil {
			return err
		}
		if after.Seq <= head.Seq {
			break
		}
		if err := f.waitChange(ctx, changed, deadline); err != nil {
			return err
		}
	}
	compacted, err := f.log.CompactedThrough(ctx)
	if err != nil {
		return err
	}
	if after.Seq < compacted {
		return fmt.Errorf("%w: position %d, events up to %d were removed", resource.ErrExpired, after.Seq, compacted)
	}
	return nil
}

// ahead returns resource.ErrOtherEpoch if after is of another epoch than head, or beyond it past *deadline (which
// it sets, the first time after is beyond head, to the end of the grace).
func (f *Feed) ahead(after, head resource.Position, deadline *time.Time) error {
	if after.Epoch != head.Epoch {
		return fmt.Errorf("%w: position of epoch %q, the feed's is %q", resource.ErrOtherEpoch, after.Epoch, head.Epoch)
	}
	if after.Seq <= head.Seq {
		return nil
	}
	if deadline.IsZero() {
		*deadline = time.Now().Add(f.grace)
	} else if !time.Now().Before(*deadline) {
		return fmt.Errorf("%w: position %d is beyond the feed's head %d", resource.ErrOtherEpoch, after.Seq, head.Seq)
	}
	return nil
}

// waitChange waits until the feed moves, ctx ends, or deadline (if set) passes.
func (f *Feed) waitChange(ctx context.Context, changed <-chan struct{}, deadline time.Time) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Next returns up to limit events after after, in order, waiting until there is one or ctx ends. It returns
// resource.ErrExpired (wrapped) as Check does, whenever it finds that after has missed events.
func (f *Feed) Next(ctx context.Context, after resource.Position, limit int) ([]resource.Event, error) {
	limit = max(limit, 1)
	var deadline time.Time
	for {
		f.mu.Lock()
		head, changed := f.head, f.changed
		var out []resource.Event
		fromMemory := len(f.ring) > 0 && f.ring[0].Seq <= after.Seq+1
		if after.Epoch == head.Epoch && after.Seq < head.Seq && fromMemory {
			// Sequence numbers ascend in the ring, so the first event after after is found by halving.
			first, _ := slices.BinarySearchFunc(f.ring, after.Seq+1, func(e resource.Event, seq int64) int { return cmp.Compare(e.Seq, seq) })
			out = slices.Clone(f.ring[first:min(len(f.ring), first+limit)])
		}
		f.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		if err := f.ahead(after, head, &deadline); err != nil {
			return nil, err
		}
		if after.Seq < head.Seq && !fromMemory {
			// Behind what memory holds: read the log, which also tells, in the same snapshot, when the reader
			// fell behind retention.
			events, err := f.log.Events(ctx, after, limit)
			if err != nil || len(events) > 0 {
				return events, err
			}
		}
		if after.Seq <= head.Seq {
			deadline = time.Time{}
		}
		if err := f.waitChange(ctx, changed, deadline); err != nil {
			return nil, err
		}
	}
}
