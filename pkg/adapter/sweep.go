package adapter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// OrphanReader is what Orphans asks hyperfleet-api; *API is one.
type OrphanReader interface {
	IDs(ctx context.Context, kind *Kind) (map[string]bool, error)
	Get(ctx context.Context, kind *Kind, parentID, id string) (*Object, error)
}

var _ OrphanReader = (*API)(nil)

// Named is a resource that an object in an adapter's external system names (by a label, a tag): its id, and its
// parent's for a child kind.
type Named struct {
	ID, ParentID string
}

// Orphans tells which of the resources an adapter's external objects name the API no longer has: removed without
// the adapter's finalizer (a force-delete, a restored database) or named by hand. An adapter sweeps the objects of
// such a resource once it has been an orphan for a grace period, counted from when this replica first saw the API
// answer 404 for it: long enough for an operator to notice a resource removed by mistake (or an adapter pointed at
// the wrong API) before anything is deleted. One goroutine uses it.
type Orphans struct {
	reader OrphanReader
	kind   *Kind
	grace  time.Duration
	since  map[string]time.Time // by id
}

// NewOrphans returns the orphan tracker of resources of kind; grace must be positive.
func NewOrphans(reader OrphanReader, kind *Kind, grace time.Duration) (*Orphans, error) {
	if reader == nil || kind == nil || grace <= 0 {
		return nil, errors.New("orphans: a reader of the API, a kind and a positive grace period are required")
	}
	return &Orphans{reader: reader, kind: kind, grace: grace, since: map[string]time.Time{}}, nil
}

// OrphanCheck is what one Check found.
type OrphanCheck struct {
	// Since holds every orphan (named now, 404 from the API), by id: when this replica first saw it so.
	Since map[string]time.Time
	// Found are the ids that became orphans in this check; Due those whose grace had passed at its time. Sorted.
	Found, Due []string
}

// Check asks the API about the resources named now: one list of every id of the kind, deleting ones included (a
// request per 500 resources), and a GET of each named resource missing from it, so that only the API's 404 makes
// an orphan. A resource it could not answer for keeps what it was; one no longer named, or that the API has after
// all, is forgotten. When the list fails, nothing changes and the error is returned.
func (o *Orphans) Check(ctx context.Context, named []Named, now time.Time) (OrphanCheck, error) {
	if len(named) == 0 { // nothing to ask about: no request
		clear(o.since)
		return OrphanCheck{Since: map[string]time.Time{}}, nil
	}
	live, err := o.reader.IDs(ctx, o.kind)
	if err != nil {
		return OrphanCheck{}, fmt.Errorf("list the %s: %w", o.kind.Plural, err)
	}
	byID := map[string]Named{}
	for _, n := range named {
		byID[n.ID] = n
	}
	for id := range o.since {
		if _, ok := byID[id]; !ok {
			delete(o.since, id)
		}
	}
	var check OrphanCheck
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		if live[id] {
			delete(o.since, id)
			continue
		}
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		_, err := o.reader.Get(ctx, o.kind, byID[id].ParentID, id)
		switch {
		case err == nil:
			delete(o.since, id)
		case errors.Is(err, ErrNotFound):
			if _, known := o.since[id]; !known {
				o.since[id] = now
				check.Found = append(check.Found, id)
			}
		default:
			errs = append(errs, fmt.Errorf("%s %s: %w", o.kind.Name, id, err))
		}
	}
	check.Since = maps.Clone(o.since)
	for _, id := range slices.Sorted(maps.Keys(o.since)) {
		if now.Sub(o.since[id]) >= o.grace {
			check.Due = append(check.Due, id)
		}
	}
	return check, errors.Join(errs...)
}
