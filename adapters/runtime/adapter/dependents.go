package adapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Dependents makes a change in a resource of another kind re-queue the resources that name it, the way a
// Kubernetes controller watches a secondary kind: when Adapter's report on a resource of Kind changes the value
// of any of DataKeys, every live resource of the controller's kind whose spec field Field holds that resource's
// name is queued within one poll interval, whatever it was scheduled for. The applier uses it so that a
// VersionStream re-resolved to a new release image rolls its clusters at once rather than at their next re-check.
//
// Finding the change costs one list of Kind per poll interval: a report that changes its data also changes the
// referenced resource's aggregated condition for Adapter (the API mirrors the report's Available condition, and
// an adapter whose data others follow names what it holds in that condition's message, as the version resolver
// names the version), so only resources whose aggregate moved have their report read. The resources that name a
// changed one are found by a search on the API (`spec.<Field> = '<name>'`).
//
// Changes are seen from the first poll on: the first look at a resource only learns its state, because the
// controller's own poll and re-check (Config.ResyncAfter) cover what changed while the adapter was not running.
type Dependents struct {
	// Kind is the referenced kind, e.g. VersionStreams().
	Kind *Kind
	// Field is the top-level spec field of the controller's kind that names a resource of Kind, e.g.
	// "version_stream".
	Field string
	// Adapter is the adapter whose report on the referenced resource matters, e.g. "version-resolver".
	Adapter string
	// DataKeys are the keys of that report's data whose values matter, e.g. "release_image".
	DataKeys []string
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
	case !conditions.ValidAdapterName(d.Adapter):
		return fmt.Errorf("dependents of %s: adapter %q is not an adapter name", d.Kind.Name, d.Adapter)
	case len(d.DataKeys) == 0:
		return fmt.Errorf("dependents of %s: no data keys to follow", d.Kind.Name)
	}
	return nil
}

// dependentsSource is the poll-driven source of one Dependents of one controller.
type dependentsSource struct {
	r       *Runner
	primary *Kind
	dep     Dependents
	// seen holds, per referenced resource id, what the last poll saw of it.
	seen map[string]referenced
}

// referenced is what the source remembers of a referenced resource.
type referenced struct {
	aggregate string // a fingerprint of its aggregated condition for the adapter (and its generation)
	data      string // the followed data keys of the adapter's report, as JSON
}

func newDependentsSource(r *Runner, primary *Kind, dep Dependents) *dependentsSource {
	return &dependentsSource{r: r, primary: primary, dep: dep, seen: map[string]referenced{}}
}

func (s *dependentsSource) poll(ctx context.Context) error {
	r := s.r
	first := len(s.seen) == 0
	present := make(map[string]bool, len(s.seen))
	queued, after := 0, ""
	for {
		q := listQuery{fields: "id,name,generation,status", size: r.cfg.PageSize, order: "id"}
		if after != "" {
			q.search = "id > '" + after + "'"
		}
		items, err := s.dep.Kind.ops.list(withOp(ctx, "list referenced"), r.api.client, "", q)
		if err != nil {
			return s.failed(ctx, err)
		}
		for _, it := range items {
			present[it.ID] = true
			n, err := s.look(ctx, it)
			if err != nil {
				return s.failed(ctx, err)
			}
			queued += n
		}
		if len(items) < r.cfg.PageSize {
			break
		}
		after = items[len(items)-1].ID
	}
	for id := range s.seen {
		if !present[id] {
			delete(s.seen, id)
		}
	}
	if queued > 0 || first {
		r.log.Debug("dependents", slog.String("kind", s.primary.Name), slog.String("changed_kind", s.dep.Kind.Name),
			slog.Int("referenced", len(s.seen)), slog.Int("queued", queued))
	}
	return nil
}

func (s *dependentsSource) failed(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		s.r.metrics.polls.WithLabelValues(s.dep.Kind.Name, "error").Inc()
		s.r.log.Warn("dependents poll failed", slog.String("kind", s.primary.Name), slog.String("changed_kind", s.dep.Kind.Name), slog.Any("error", err))
	}
	return err
}

// look compares one referenced resource with what the last poll saw and queues its dependents when the followed
// data changed; it returns how many it queued.
func (s *dependentsSource) look(ctx context.Context, it listItem) (int, error) {
	agg := aggregateFingerprint(it, s.dep.Adapter)
	prev, known := s.seen[it.ID]
	if known && prev.aggregate == agg {
		return 0, nil
	}
	rep, err := s.r.api.Report(ctx, s.dep.Kind, "", it.ID, s.dep.Adapter)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return 0, nil // removed since the list: the next poll forgets it
		}
		return 0, err
	}
	data := followed(rep, s.dep.DataKeys)
	s.seen[it.ID] = referenced{aggregate: agg, data: data}
	if !known || prev.data == data {
		return 0, nil
	}
	return s.queueDependents(ctx, it.Name)
}

// queueDependents wakes every live resource of the primary kind in this replica's shard that names name.
func (s *dependentsSource) queueDependents(ctx context.Context, name string) (int, error) {
	r := s.r
	if !conditions.ValidAdapterName(name) { // a resource name is a DNS label, so it needs no quoting in a search
		return 0, nil
	}
	queued, after := 0, ""
	for {
		q := listQuery{search: "spec." + s.dep.Field + " = '" + name + "'", fields: "id,owner_references", size: r.cfg.PageSize, order: "id"}
		if after != "" {
			q.search += " and id > '" + after + "'"
		}
		items, err := s.primary.ops.list(withOp(ctx, "list dependents"), r.api.client, "", q)
		if err != nil {
			return queued, err
		}
		for _, it := range items {
			if shardOf(it.ID, r.cfg.ShardCount) != r.cfg.ShardIndex {
				continue
			}
			r.queue.wake(it.Key)
			queued++
		}
		if len(items) < r.cfg.PageSize {
			break
		}
		after = items[len(items)-1].ID
	}
	r.metrics.dependents.WithLabelValues(s.primary.Name, s.dep.Kind.Name).Add(float64(queued))
	r.log.Info("a referenced resource changed: queued the resources that name it", slog.String("kind", s.primary.Name),
		slog.String("changed_kind", s.dep.Kind.Name), slog.String("name", name), slog.Int("queued", queued))
	return queued, nil
}

// aggregateFingerprint is what changes on a referenced resource when adapter's report on it changes: the
// aggregated condition that mirrors the report's Available, and the generation.
func aggregateFingerprint(it listItem, adapter string) string {
	c, _ := conditions.Find(it.Conditions, conditions.AdapterAvailable(adapter))
	return strings.Join([]string{strconv.FormatInt(it.Generation, 10), string(c.Status), c.Reason, c.Message,
		strconv.FormatInt(c.ObservedGeneration, 10)}, "\x00")
}

// followed returns the followed keys of a report's data as comparable text, "" without a report. fmt prints maps
// with sorted keys, so equal values give equal text.
func followed(rep *Report, keys []string) string {
	if rep == nil {
		return ""
	}
	values := make(map[string]any, len(keys))
	for _, k := range keys {
		values[k] = rep.Data[k]
	}
	return fmt.Sprintf("%#v", values)
}
