package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Dependents makes a change in a resource of another kind re-queue the resources that name it, the way a
// Kubernetes controller watches a secondary kind: when a resource of Kind changes, every live resource of the
// controller's kind whose spec field Field holds that resource's name is queued, whatever it was scheduled for: as
// soon as the change's event arrives (Config.Source watch or nats; the poll is then the safety net), or within one
// poll interval (poll). What counts as a change is either
//   - with Adapter set: Adapter's report on the referenced resource changing the value of any of DataKeys. The
//     applier follows version-resolver's release_image so that a re-resolved VersionStream rolls its clusters at
//     once rather than at their next re-check; or
//   - without Adapter: the referenced resource's spec changing (its generation), e.g. a cluster's UpgradeSchedule.
//
// Finding the change costs one list of Kind per poll interval, plus one look per event of Kind (a watch brings the
// resource with the event; a NATS message needs one read). With Adapter set, only resources whose aggregated
// condition for Adapter moved have their report read: the API mirrors the report's Available condition there, and an
// adapter whose data others follow names what it holds in that condition's message (as the version resolver names
// the version). The resources that name a changed one are found by a search on the API
// (`spec.<Field> = '<name>'`).
//
// Changes are seen from the first list on: the first look at a resource only learns its state, because the
// controller's own poll and re-check (Config.ResyncAfter) cover what changed while the adapter was not running.
// What the source has seen is what Runner.Referenced answers, so reconcilers need not read it again.
type Dependents struct {
	// Kind is the referenced kind, e.g. VersionStreams().
	Kind *Kind
	// Field is the top-level spec field of the controller's kind that names a resource of Kind, e.g.
	// "version_stream".
	Field string
	// Adapter is the adapter whose report on the referenced resource matters, e.g. "version-resolver"; empty to
	// follow the referenced resource's spec instead.
	Adapter string
	// DataKeys are the keys of that report's data whose values matter, e.g. "release_image"; required with Adapter.
	DataKeys []string
	// Affected, when set (with Adapter, on a controller of a root kind), narrows a change of the followed data to
	// the resources it concerns: given the followed data before and after, it returns the ids of the controller's
	// resources to wake (those of this replica's shard are), or all to wake every resource that names the changed
	// one. A report that changes at every pass for a few of its dependents (a stream's rollout admitting clusters)
	// then costs a reconcile per concerned resource, not one per dependent. The ids are woken as they are, without
	// checking that they still name the changed resource: a needless reconcile is harmless.
	Affected func(old, cur map[string]any) (ids []string, all bool)
}

var specField = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func (d Dependents) check() error {
	switch {
	case d.Kind == nil || d.Kind.Plural == "":
		return errors.New("dependents without a kind")
	case d.Kind.Parent != nil:
		return fmt.Errorf("dependents of %s: only root kinds are named by spec fields", d.Kind.Name)
	case !specField.MatchString(d.Field):
		return fmt.Errorf("dependents of %s: field %q is not a top-level spec field", d.Kind.Name, d.Field)
	case d.Adapter != "" && !conditions.ValidAdapterName(d.Adapter):
		return fmt.Errorf("dependents of %s: adapter %q is not an adapter name", d.Kind.Name, d.Adapter)
	case d.Adapter != "" && len(d.DataKeys) == 0:
		return fmt.Errorf("dependents of %s: no data keys to follow of %s's report", d.Kind.Name, d.Adapter)
	case d.Adapter == "" && len(d.DataKeys) > 0:
		return fmt.Errorf("dependents of %s: data keys need the adapter whose report holds them", d.Kind.Name)
	case d.Affected != nil && d.Adapter == "":
		return fmt.Errorf("dependents of %s: Affected narrows a change of followed data, which needs an adapter", d.Kind.Name)
	}
	return nil
}

// checkFor checks d as a dependent of the controller of kind primary: waking by id (Affected) needs the queue key
// of a resource, which for a child kind would need its parent's id too.
func (d Dependents) checkFor(primary *Kind) error {
	if err := d.check(); err != nil {
		return err
	}
	if d.Affected != nil && primary.Parent != nil {
		return fmt.Errorf("dependents of %s: Affected wakes resources by id, which only a root kind's controller can", d.Kind.Name)
	}
	return nil
}

// dependentsSource follows the referenced kind of one Dependents of one controller (by list, and by events), and
// is the cache of what it saw.
type dependentsSource struct {
	r       *Runner
	primary *Kind
	dep     Dependents

	// pass serializes the source's lists and events, which both compare with and update what it has seen.
	pass sync.Mutex
	mu   sync.Mutex
	// seen holds, per referenced resource id, what the source last saw of it; byName finds it by name.
	seen   map[string]*referenced
	byName map[string]*referenced
}

// referenced is what the source remembers of a referenced resource.
type referenced struct {
	Reference
	fingerprint string // what must move before the followed values are looked at again
	followed    string // the followed values as comparable text
}

// Reference is a referenced resource as the runtime's Dependents source last saw it.
type Reference struct {
	ID         string
	Name       string
	Generation int64
	Spec       map[string]any
	// Data holds the followed keys of the followed adapter's report (nil without Dependents.Adapter, or before
	// its first report).
	Data map[string]any
}

func newDependentsSource(r *Runner, primary *Kind, dep Dependents) *dependentsSource {
	return &dependentsSource{r: r, primary: primary, dep: dep, seen: map[string]*referenced{}, byName: map[string]*referenced{}}
}

// lookup returns the reference named name, if the source has seen it.
func (s *dependentsSource) lookup(name string) (Reference, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ok := s.byName[name]
	if !ok {
		return Reference{}, false
	}
	return ref.Reference, true
}

var (
	_ source      = (*dependentsSource)(nil)
	_ feedHandler = (*dependentsSource)(nil)
)

func (s *dependentsSource) poll(ctx context.Context) error {
	_, err := s.list(ctx)
	return err
}

func (s *dependentsSource) feedKind() *Kind { return s.dep.Kind }

// watchQuery watches every resource of the referenced kind, with what look compares.
func (s *dependentsSource) watchQuery() listQuery {
	return listQuery{fields: referencedFields}
}

// referencedFields are what the source reads of a referenced resource.
const referencedFields = "id,name,generation,status,spec,deleted_time"

// list looks at every referenced resource, queues the dependents of those whose followed values changed, forgets
// those that are gone, and returns the position of its first page.
func (s *dependentsSource) list(ctx context.Context) (string, error) {
	// One pass at a time, and no event while it runs: the pass forgets what its list did not show, which must not
	// include a resource an event made known meanwhile.
	s.pass.Lock()
	defer s.pass.Unlock()
	r := s.r
	s.mu.Lock()
	first := len(s.seen) == 0
	s.mu.Unlock()
	present := map[string]bool{}
	queued, after, position := 0, "", ""
	for {
		q := listQuery{fields: referencedFields, size: r.cfg.PageSize, order: "id", after: after}
		page, err := r.api.list(withOp(ctx, "list referenced"), s.dep.Kind, "", q)
		if err != nil {
			return "", s.failed(ctx, err)
		}
		if after == "" {
			position = page.position
		}
		for i := range page.items {
			present[page.items[i].ID] = true
			n, err := s.look(ctx, &page.items[i])
			if err != nil {
				return "", s.failed(ctx, err)
			}
			queued += n
		}
		if page.next == "" {
			break
		}
		after = page.next
	}
	s.mu.Lock()
	for id := range s.seen {
		if !present[id] {
			s.dropLocked(id)
		}
	}
	known := len(s.seen)
	s.mu.Unlock()
	r.contact()
	if queued > 0 || first {
		r.log.Debug("dependents", slog.String("kind", s.primary.Name), slog.String("changed_kind", s.dep.Kind.Name),
			slog.Int("referenced", known), slog.Int("queued", queued))
	}
	return position, nil
}

// handle looks at the resource an event is about, as list looks at each: a change of what is followed queues
// the resources that name it; a removed resource is forgotten.
func (s *dependentsSource) handle(ctx context.Context, e *feedEvent) error {
	s.pass.Lock()
	defer s.pass.Unlock()
	id := e.Id.String()
	if e.Type == api.WatchEventTypeRemoved {
		s.drop(id)
		return nil
	}
	var it listItem
	switch {
	case e.Object != nil:
		var err error
		if it, err = itemOf(s.dep.Kind, e.Object); err != nil {
			return err
		}
	case e.filtered:
		// A watch sends an event without its resource when the resource is gone since.
		s.drop(id)
		return nil
	default:
		// NATS relays the event without the resource: read it as a list would show it.
		page, err := s.r.api.list(withOp(ctx, "get referenced"), s.dep.Kind, "",
			listQuery{search: "id = '" + id + "'", fields: referencedFields, size: 1, includeDeleted: true})
		if err != nil {
			return err
		}
		if len(page.items) == 0 {
			s.drop(id)
			return nil
		}
		it = page.items[0]
	}
	if it.Deleting {
		s.drop(id) // a list hides a deleting resource: it is gone as far as references go
		return nil
	}
	_, err := s.look(ctx, &it)
	return err
}

// drop forgets a referenced resource.
func (s *dependentsSource) drop(id string) {
	s.mu.Lock()
	s.dropLocked(id)
	s.mu.Unlock()
}

func (s *dependentsSource) dropLocked(id string) {
	if ref, ok := s.seen[id]; ok {
		delete(s.seen, id)
		if s.byName[ref.Name] == ref {
			delete(s.byName, ref.Name)
		}
	}
}

// itemOf reads a watch event's resource (a sparse projection) as a list item.
func itemOf(kind *Kind, object json.RawMessage) (listItem, error) {
	var r api.SparseResource
	if err := json.Unmarshal(object, &r); err != nil {
		return listItem{}, fmt.Errorf("watch event of %s: the resource: %w", kind.Name, err)
	}
	return sparseItem(kind, &r), nil
}

func (s *dependentsSource) failed(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		s.r.metrics.polls.WithLabelValues(s.dep.Kind.Name, "error").Inc()
		s.r.log.Warn("dependents poll failed", slog.String("kind", s.primary.Name), slog.String("changed_kind", s.dep.Kind.Name), slog.Any("error", err))
	}
	return err
}

// look compares one referenced resource with what the source last saw and queues its dependents when what is
// followed changed; it returns how many it queued.
func (s *dependentsSource) look(ctx context.Context, it *listItem) (int, error) {
	fingerprint := strconv.FormatInt(it.Generation, 10)
	if s.dep.Adapter != "" {
		fingerprint = aggregateFingerprint(it, s.dep.Adapter)
	}
	s.mu.Lock()
	prev, known := s.seen[it.ID]
	s.mu.Unlock()
	if known && prev.fingerprint == fingerprint {
		return 0, nil
	}
	ref := &referenced{Reference: Reference{ID: it.ID, Name: it.Name, Generation: it.Generation, Spec: it.Spec}, fingerprint: fingerprint}
	if s.dep.Adapter == "" {
		ref.followed = fingerprint
	} else {
		rep, err := s.r.api.Report(ctx, s.dep.Kind, "", it.ID, s.dep.Adapter)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return 0, nil // removed since it was read: its removed event or the next list forgets it
			}
			return 0, err
		}
		ref.Data = followedData(rep, s.dep.DataKeys)
		ref.followed = fmt.Sprintf("%#v", ref.Data) // fmt prints maps with sorted keys: equal data, equal text
	}
	// The cache is updated before the dependents are woken, so that their reconciles read the new values.
	s.mu.Lock()
	if known && s.byName[prev.Name] == prev {
		delete(s.byName, prev.Name)
	}
	s.seen[it.ID], s.byName[it.Name] = ref, ref
	s.mu.Unlock()
	if !known || prev.followed == ref.followed {
		return 0, nil
	}
	if s.dep.Affected != nil {
		if ids, all := s.dep.Affected(prev.Data, ref.Data); !all {
			return s.wakeAffected(it.Name, ids), nil
		}
	}
	return s.queueDependents(ctx, it.Name)
}

// wakeAffected wakes the resources of ids in this replica's shard, as Dependents.Affected named them for a change of
// the resource named name.
func (s *dependentsSource) wakeAffected(name string, ids []string) int {
	r := s.r
	queued := 0
	for _, id := range ids {
		if !r.owns(id) {
			continue
		}
		key := Key{Kind: s.primary.Plural, ID: id}
		r.held.unkeep(key)
		r.queue.wake(key)
		queued++
	}
	r.metrics.dependents.WithLabelValues(s.primary.Name, s.dep.Kind.Name).Add(float64(queued))
	r.log.Info("a referenced resource changed: queued the resources the change concerns", slog.String("kind", s.primary.Name),
		slog.String("changed_kind", s.dep.Kind.Name), slog.String("name", name), slog.Int("affected", len(ids)), slog.Int("queued", queued))
	return queued
}

// queueDependents wakes every live resource of the primary kind in this replica's shard that names name.
func (s *dependentsSource) queueDependents(ctx context.Context, name string) (int, error) {
	r := s.r
	if !conditions.ValidAdapterName(name) { // a resource name is a DNS label, so it needs no quoting in a search
		return 0, nil
	}
	queued, after := 0, ""
	for {
		q := listQuery{search: "spec." + s.dep.Field + " = '" + name + "'", fields: "id,owner_references", size: r.cfg.PageSize,
			order: "id", after: after}
		page, err := r.api.list(withOp(ctx, "list dependents"), s.primary, "", q)
		if err != nil {
			return queued, err
		}
		items := page.items
		for _, it := range items {
			if !r.owns(it.ID) {
				continue
			}
			r.held.unkeep(it.Key)
			r.queue.wake(it.Key)
			queued++
		}
		if page.next == "" {
			break
		}
		after = page.next
	}
	r.metrics.dependents.WithLabelValues(s.primary.Name, s.dep.Kind.Name).Add(float64(queued))
	r.log.Info("a referenced resource changed: queued the resources that name it", slog.String("kind", s.primary.Name),
		slog.String("changed_kind", s.dep.Kind.Name), slog.String("name", name), slog.Int("queued", queued))
	return queued, nil
}

// aggregateFingerprint is what changes on a referenced resource when adapter's report on it changes: the
// aggregated condition that mirrors the report's Available, and the generation.
func aggregateFingerprint(it *listItem, adapter string) string {
	c, _ := conditions.Find(it.Conditions, conditions.AdapterAvailable(adapter))
	return strings.Join([]string{strconv.FormatInt(it.Generation, 10), string(c.Status), c.Reason, c.Message,
		strconv.FormatInt(c.ObservedGeneration, 10)}, "\x00")
}

// followedData returns the followed keys of a report's data; nil without a report.
func followedData(rep *Report, keys []string) map[string]any {
	if rep == nil {
		return nil
	}
	values := make(map[string]any, len(keys))
	for _, k := range keys {
		values[k] = rep.Data[k]
	}
	return values
}
