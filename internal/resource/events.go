package resource

import (
	"context"
	"errors"
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
}

// EventLog is the sequenced change feed as stored.
type EventLog interface {
	// Events returns up to limit events with a sequence above after, in order.
	Events(ctx context.Context, after int64, limit int) ([]Event, error)
	// Head returns the highest sequence, 0 for none.
	Head(ctx context.Context) (int64, error)
	// CompactedThrough returns the highest sequence removed by retention, 0 for none: a position below it
	// has missed events.
	CompactedThrough(ctx context.Context) (int64, error)
}

// ErrExpired is returned for a position older than the retained events: the caller must list again.
var ErrExpired = errors.New("the position is older than the retained events")
