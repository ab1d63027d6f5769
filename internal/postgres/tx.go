package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Each Tx method is its own statement on purpose: under READ COMMITTED a statement reads a snapshot taken when
// it starts, so what is read after Lock returns (the reports) must be read by a later statement to see the
// writes of the transaction that held the lock before us.

// txAttempts bounds retries of a transaction that lost a deadlock or serialization race; such a loss means
// another writer won, so trying again soon almost always succeeds.
const txAttempts = 4

// InTx implements resource.Store (see pipeline.go for how its transaction talks to the database).
func (s *Store) InTx(ctx context.Context, fn func(tx resource.Tx) error) error {
	sc := s.scopeOf(ctx)
	pool, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("database handle: %w", err)
	}
	for attempt := 1; attempt <= txAttempts; attempt++ {
		err = s.runTx(ctx, pool, sc, fn)
		if err == nil {
			s.wrote()
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
	}
	return err
}

func retryable(err error) bool {
	code := sqlstate(err)
	return code == sqlstateDeadlock || code == sqlstateSerialization
}

// txStore is resource.Tx on one transaction, on one connection it holds (pipeline.go).
type txStore struct {
	ctx  context.Context
	conn *sql.Conn
	// gdb is GORM on conn; statements reach it through db or reader, which send what is queued first.
	gdb *gorm.DB
	// pending is what the next round trip sends before its own statement: BEGIN (and the tenant's settings) at
	// first, then deferred statements.
	pending []queued
	// sent: BEGIN has gone out. deferred: pending holds a deferred statement. dirty: a statement that may have
	// written has been sent, so COMMIT may not travel with a deferred one (commit).
	sent, deferred, dirty bool
	store                 *Store
	scope                 scope
	// actor is the caller's name, for the history entries of removals (Remove).
	actor string
}

var _ resource.Tx = (*txStore)(nil)

func (t *txStore) Lock(d *resource.Descriptor, parentID, id string) (*resource.Resource, error) {
	return get(t.reader(), t.scope, d, parentID, id, true)
}

func (t *txStore) LockIDs(d *resource.Descriptor, ids []string) ([]*resource.Resource, error) {
	return t.lockWhere(d, "id IN ?", ids)
}

func (t *txStore) LockChildren(d *resource.Descriptor, parentID string) ([]*resource.Resource, error) {
	return t.lockWhere(d, "parent_id = ? AND deleted_time IS NULL", parentID)
}

func (t *txStore) lockWhere(d *resource.Descriptor, cond string, args ...any) ([]*resource.Resource, error) {
	var rows []row
	cond, args = andTenant(cond, args, d, t.scope, "")
	// A fixed order keeps concurrent lockers of overlapping sets from deadlocking each other.
	err := t.reader().Table(d.Table).Select(columns(d)).Where(cond, args...).Order("id").
		Clauses(clause.Locking{Strength: "UPDATE"}).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("lock %s rows: %w", d.Kind, err)
	}
	out := make([]*resource.Resource, len(rows))
	for i := range rows {
		r, err := rows[i].toResource(d, true)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func (t *txStore) HasChildren(d *resource.Descriptor, id string) (bool, error) {
	for _, child := range t.store.children[d] {
		var found []string
		if err := t.reader().Table(child.Table).Where("parent_id = ?", id).Limit(1).Pluck("id", &found).Error; err != nil {
			return false, fmt.Errorf("look for %s children: %w", child.Kind, err)
		}
		if len(found) > 0 {
			return true, nil
		}
	}
	return false, nil
}

func (t *txStore) Save(d *resource.Descriptor, r *resource.Resource, event resource.EventType) error {
	w, err := toRow(d, r)
	if err != nil {
		return err
	}
	// One round trip: the row (its version moves on), the event for the change feed, and the copies of its
	// generation and deleting flag that make "pending" a single-row property of its reports (a no-op for them
	// unless those changed).
	var versions []int64
	err = rawScan(t.db().Raw(`WITH saved AS (UPDATE `+d.Table+` SET labels = ?, spec = ?, generation = ?, phase = ?, conditions = ?,
			aggregated_for = ?, updated_time = ?, updated_by = ?, deleted_time = ?, deleted_by = ?, deletion_protection = ?,
			version = version + 1
			WHERE id = ? RETURNING id, version, generation, tenant),
		copied AS (UPDATE adapter_statuses SET resource_generation = ?, resource_deleting = ?
			WHERE resource_id = (SELECT id FROM saved) AND (resource_generation <> ? OR resource_deleting <> ?)),
		staged AS (INSERT INTO event_staging (type, kind, resource_id, parent_id, generation, version, tenant)
			SELECT ?, ?, id, ?::uuid, generation, version, tenant FROM saved)
		SELECT version FROM saved`,
		w.Labels, w.Spec, w.Generation, w.Phase, w.Conditions, w.AggregatedFor, w.UpdatedTime, w.UpdatedBy, w.DeletedTime,
		w.DeletedBy, w.DeletionProtection, r.ID, r.Generation, r.Deleting(), r.Generation, r.Deleting(),
		string(event), d.Kind, nullableID(r.ParentID)), &versions)
	if err != nil {
		return fmt.Errorf("save %s %s: %w", d.Kind, r.ID, err)
	}
	if len(versions) != 1 {
		return resource.NotFound(d, r.ID)
	}
	r.Version = versions[0]
	return nil
}

func (t *txStore) Statuses(ids []string) (map[string][]resource.AdapterStatus, error) {
	return readStatuses(t.reader(), ids, t.scope)
}

// Remove implements resource.Tx: a removed event and a history entry for each resource of the subtree, deepest
// first, then the reports of the whole subtree (they have no foreign key, as they serve every kind), then the row,
// whose descendants go with it by ON DELETE CASCADE.
func (t *txStore) Remove(d *resource.Descriptor, id string, action resource.HistoryAction) error {
	levels, err := t.subtree(d, []string{id})
	if err != nil {
		return err
	}
	var ids []string
	for i := len(levels) - 1; i >= 0; i-- {
		level := levels[i]
		// One statement per level: the event and the history entry are read from the same rows.
		err := t.db().Exec(`WITH gone AS (SELECT id, `+parentColumn(level.d)+` AS parent_id, generation, version, tenant, phase
				FROM `+level.d.Table+` WHERE id IN ?),
			staged AS (INSERT INTO event_staging (type, kind, resource_id, parent_id, generation, version, tenant)
				SELECT 'removed', ?, id, parent_id, generation, version, tenant FROM gone ORDER BY id)
			INSERT INTO resource_history (tenant, kind, resource_id, parent_id, time, actor, action, generation, phase_from)
			SELECT tenant, ?, id, parent_id, now(), ?, ?, generation, phase FROM gone ORDER BY id`,
			level.ids, level.d.Kind, level.d.Kind, t.actor, string(action)).Error
		if err != nil {
			return fmt.Errorf("stage removed events of %s: %w", level.d.Kind, err)
		}
		ids = append(ids, level.ids...)
	}
	if err := t.db().Exec("DELETE FROM adapter_statuses WHERE resource_id IN ?", ids).Error; err != nil {
		return fmt.Errorf("delete statuses of %s %s: %w", d.Kind, id, err)
	}
	res := t.db().Exec("DELETE FROM "+d.Table+" WHERE id = ?", id)
	if res.Error != nil {
		return fmt.Errorf("delete %s %s: %w", d.Kind, id, res.Error)
	}
	if res.RowsAffected == 0 {
		return resource.NotFound(d, id)
	}
	return nil
}

// parentColumn is the SQL for a row's parent id: the column for a child kind, NULL for a root kind.
func parentColumn(d *resource.Descriptor) string {
	if d.Parent == nil {
		return "NULL::uuid"
	}
	return "parent_id"
}

// subtreeLevel is the ids of one kind in a subtree, all at one depth.
type subtreeLevel struct {
	d   *resource.Descriptor
	ids []string
}

// subtree returns ids (of kind d) and their descendants, a level per kind and depth, from the top.
func (t *txStore) subtree(d *resource.Descriptor, ids []string) ([]subtreeLevel, error) {
	levels := []subtreeLevel{{d: d, ids: ids}}
	for _, child := range t.store.children[d] {
		var kids []string
		if err := t.reader().Table(child.Table).Where("parent_id IN ?", ids).Pluck("id", &kids).Error; err != nil {
			return nil, fmt.Errorf("list %s children: %w", child.Kind, err)
		}
		if len(kids) == 0 {
			continue
		}
		more, err := t.subtree(child, kids)
		if err != nil {
			return nil, err
		}
		levels = append(levels, more...)
	}
	return levels, nil
}
