package httpapi

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// seedPage is how many ids a filtered watch reads at a time when it learns which resources match its filter.
const seedPage = 1000

// seedSlack covers the clocks of the API process and PostgreSQL disagreeing, and a change committed before the
// seed was read but numbered in the feed after it: events that close to the seed are treated as if before it.
const seedSlack = 5 * time.Second

// matching is what a filtered watch knows of its view: the resources that matched its filter when last seen
// (when the watch started, or in an event it sent since). An event whose resource is in the set but no longer
// matches is sent as `left`, as Kubernetes sends DELETED for an object that stops matching a selector.
//
// The set is read when the watch starts, which may be after the position the watch starts from: a resource that
// matched at that position and stopped before the set was read is not in it. So an event that may predate the set
// (by its sequence, or its time with seedSlack) whose resource does not match is sent as `left` unless the stream
// knows better (it saw the resource created, or already told it left): a `left` for a resource the watcher never
// had is harmless, a missing one leaves a stale entry in its view for good.
type matching struct {
	// ids holds true for a resource in the view, false for one known to be out of it while events may still
	// predate the set; a resource not in ids did not match when the set was read, or has not been seen since.
	ids        map[uuid.UUID]bool
	seqBefore  int64     // events up to this sequence may predate the set
	timeBefore time.Time // and so may events up to this time
}

// seedMatching reads the ids of the resources the watch's filter matches now, a page at a time and without their
// contents. head is the feed's head; it is read after the set, so that every event it covers may predate it.
func (k *kindHandler) seedMatching(ctx context.Context, opts resource.ListOptions, head func() resource.Position) (*matching, error) {
	m := &matching{ids: map[uuid.UUID]bool{}}
	q := resource.ListOptions{ParentID: opts.ParentID, Search: opts.Search, SearchPublic: opts.SearchPublic,
		PendingFor: opts.PendingFor, ResyncAfter: opts.ResyncAfter, IncludeDeleted: true, Page: 1, Size: seedPage,
		Order: []resource.OrderBy{{Field: "id"}}, NoCount: true, KeysOnly: true}
	for {
		res, err := k.s.svc.List(ctx, k.d, q, func(r *resource.Resource) error {
			id, err := uuid.Parse(r.ID)
			if err != nil {
				return err
			}
			m.ids[id] = true
			return nil
		})
		if err != nil {
			return nil, err
		}
		if res.Next == "" {
			break
		}
		q.After = res.Next
	}
	m.seqBefore, m.timeBefore = head().Seq, time.Now().Add(seedSlack)
	return m, nil
}

// mayPredate reports whether e may be older than the set.
func (m *matching) mayPredate(e *resource.Event) bool {
	return e.Seq <= m.seqBefore || !e.Time.After(m.timeBefore)
}

// leaves reports whether an event e whose resource does not match (any longer) is to be sent as `left`. born says
// the stream has seen the resource's creation, so the watcher cannot have had it from its list.
func (m *matching) leaves(e *resource.Event, born bool) bool {
	u, err := uuid.Parse(e.ID)
	if err != nil {
		return false
	}
	if in, known := m.ids[u]; known {
		return in
	}
	return m.mayPredate(e) && !born && e.Type != resource.EventCreated
}

// saw records what event e showed of its resource: whether it matches now.
func (m *matching) saw(e *resource.Event, matches bool) {
	u, err := uuid.Parse(e.ID)
	if err != nil {
		return
	}
	switch {
	case matches:
		m.ids[u] = true
	case m.mayPredate(e):
		m.ids[u] = false
	default:
		delete(m.ids, u)
	}
}
