package resource

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// EventType says what changed about a resource.
type EventType string

// The event types, as the watch and the JetStream subjects spell them.
const (
	EventCreated  EventType = "created"
	EventUpdated  EventType = "updated"  // spec or labels
	EventStatus   EventType = "status"   // the aggregate changed (an adapter's report, a re-aggregation)
	EventDeleting EventType = "deleting" // marked for deletion
	EventRemoved  EventType = "removed"  // gone for good
)

// Event is one committed change of one resource. Seq orders the change feed: the changes of one resource come
// in the order they were made.
type Event struct {
	Seq        int64
	Time       time.Time
	Type       EventType
	Kind       string
	ID         string
	ParentID   string
	Generation int64
	Version    int64
	// Tenant is the resource's tenant: a watcher confined to a tenant is shown only its events.
	Tenant string
}

// Position is a place in the change feed: after the event numbered Seq of the feed's epoch Epoch. The epoch is a
// random id of the feed's history, renewed when that history is rewound (a restore, a failover to a replica that
// lacked commits), since sequence numbers are then handed out again: a position of another epoch has missed
// events, whatever its number.
type Position struct {
	Epoch string
	Seq   int64
}

// EventLog is the sequenced change feed as stored.
type EventLog interface {
	// Events returns up to limit events after after, in order. It reads them in one snapshot with the feed's
	// epoch and retention, and returns ErrExpired (wrapped; ErrOtherEpoch for another epoch) instead of events
	// when after has missed some, so that no reader skips events unawares.
	Events(ctx context.Context, after Position, limit int) ([]Event, error)
	// Head returns the feed's epoch and highest sequence (0 for none).
	Head(ctx context.Context) (Position, error)
	// CompactedThrough returns the highest sequence removed by retention, 0 for none: a position below it
	// has missed events.
	CompactedThrough(ctx context.Context) (int64, error)
}

// ErrExpired is returned for a position older than the retained events: the caller must list again.
var ErrExpired = errors.New("the position is older than the retained events")

// ErrOtherEpoch is returned (wrapping ErrExpired) for a position of another epoch of the change feed, or beyond
// its head: the feed was restored or failed over since, and the caller must list again.
var ErrOtherEpoch = fmt.Errorf("%w: the position is not in this history of the change feed (restored or failed over since)", ErrExpired)
