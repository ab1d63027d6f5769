package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// statusRow is one adapter's report about one resource as read back. The table also carries a copy of the
// resource's generation and deleting flag, so that whether the adapter still has work on the resource
// ("pending", a generated column) is a property of the row alone and a partial index answers pending_for without
// touching the fleet; required adapters get a placeholder row (observed_generation 0) when the resource is
// created, so "never reported" is pending too. Those columns are written by SQL and never read into Go.
type statusRow struct {
	ResourceID         string
	Adapter            string
	ObservedGeneration int64
	ObservedTime       *time.Time
	Conditions         []byte
	Data               []byte
	Metadata           []byte
	CreatedTime        time.Time
	LastReportTime     *time.Time
}

const statusColumns = "resource_id, adapter, observed_generation, observed_time, conditions, data, metadata, created_time, last_report_time"

func (w *statusRow) toStatus() (resource.AdapterStatus, error) {
	st := resource.AdapterStatus{
		ResourceID: w.ResourceID, Adapter: w.Adapter, ObservedGeneration: w.ObservedGeneration,
		Data: json.RawMessage(w.Data), Metadata: json.RawMessage(w.Metadata), CreatedTime: w.CreatedTime.UTC(),
	}
	if w.ObservedTime != nil {
		st.ObservedTime = w.ObservedTime.UTC()
	}
	if w.LastReportTime != nil {
		st.LastReportTime = w.LastReportTime.UTC()
	}
	if err := json.Unmarshal(w.Conditions, &st.Conditions); err != nil {
		return st, fmt.Errorf("decode conditions of %s's report on %s: %w", w.Adapter, w.ResourceID, err)
	}
	return st, nil
}

// fingerprint names the set of required adapters an aggregate was computed for.
func fingerprint(d *resource.Descriptor) string { return strings.Join(d.RequiredAdapters, ",") }

// readStatuses reads the reports about ids that sc may see.
func readStatuses(tx *gorm.DB, ids []string, sc scope) (map[string][]resource.AdapterStatus, error) {
	out := make(map[string][]resource.AdapterStatus, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []statusRow
	where, args := "resource_id IN ?", []any{ids}
	if !sc.all {
		where, args = where+" AND tenant = ?", append(args, sc.tenant)
	}
	err := rawScan(tx.Raw("SELECT "+statusColumns+" FROM adapter_statuses WHERE "+where+" ORDER BY resource_id, adapter", args...), &rows)
	if err != nil {
		return nil, fmt.Errorf("read statuses: %w", err)
	}
	for i := range rows {
		st, err := rows[i].toStatus()
		if err != nil {
			return nil, err
		}
		out[st.ResourceID] = append(out[st.ResourceID], st)
	}
	return out, nil
}

// reportsColumn selects, for each row of a list of d, the reports of the adapters named by its one parameter (a
// text[] literal) as a JSON array, placeholders left out as GET …/statuses leaves them out. It is part of the
// page's statement, so a page costs one round trip however many resources it holds; each resource's reports are
// found through the primary key (resource_id, adapter).
func reportsColumn(d *resource.Descriptor) string {
	return `(SELECT coalesce(json_agg(s ORDER BY s.adapter), '[]') FROM (SELECT ` + statusColumns + ` FROM adapter_statuses
		WHERE resource_id = ` + d.Table + `.id AND adapter = ANY(?::text[]) AND observed_generation > 0) s) AS reports`
}

// Statuses implements resource.Store.
func (s *Store) Statuses(ctx context.Context, id string) ([]resource.AdapterStatus, error) {
	sc := s.scopeOf(ctx)
	var all map[string][]resource.AdapterStatus
	err := s.scoped(ctx, sc, func(db *gorm.DB) error {
		var err error
		all, err = readStatuses(db, []string{id}, sc)
		return err
	})
	if err != nil {
		return nil, err
	}
	return all[id], nil
}

// finalizedGeneration is the generation at which the report says the adapter has finalized the resource (0 if it
// does not): the generated pending column compares it with the resource's generation, so whether a deleting
// resource still waits on an adapter is decided by the same vocabulary as the aggregate's Finalized.
func finalizedGeneration(st *resource.AdapterStatus) int64 {
	if conditions.IsTrue(st.Conditions, conditions.Finalized) {
		return st.ObservedGeneration
	}
	return 0
}

// pendingFor narrows a list to what adapter must look at. For a required adapter every resource has a row, so
// the partial index of pending rows and the report-time index answer it; they are asked separately (UNION ALL)
// and turned into an id array first (an InitPlan), because otherwise the planner may walk the fleet in list order
// and probe each resource, which is a scan of the fleet. An adapter that is not required may have no row at
// all, which only an anti-join can find.
func pendingFor(q *gorm.DB, d *resource.Descriptor, adapter string, resync time.Duration) *gorm.DB {
	sub := "SELECT resource_id FROM adapter_statuses WHERE kind = ? AND adapter = ? AND pending"
	args := []any{d.Kind, adapter}
	if resync > 0 {
		sub += " UNION ALL SELECT resource_id FROM adapter_statuses WHERE kind = ? AND adapter = ? AND last_report_time < ?"
		args = append(args, d.Kind, adapter, time.Now().Add(-resync))
	}
	cond := "id = ANY(ARRAY(" + sub + "))"
	if !slices.Contains(d.RequiredAdapters, adapter) {
		cond = "(" + cond + " OR NOT EXISTS (SELECT 1 FROM adapter_statuses s WHERE s.resource_id = " + d.Table + ".id AND s.adapter = ?))"
		args = append(args, adapter)
	}
	return q.Where(cond, args...)
}

// SyncRequired implements resource.Store: placeholders for adapters that became required, none left for those
// that no longer are.
func (s *Store) SyncRequired(ctx context.Context, d *resource.Descriptor) error {
	// Adapter names are DNS labels, so this array literal needs no quoting; it is still passed as a parameter.
	required := "{" + strings.Join(d.RequiredAdapters, ",") + "}"
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Exec(`DELETE FROM adapter_statuses WHERE kind = ? AND observed_generation = 0 AND NOT (adapter = ANY(?::text[]))`,
			d.Kind, required).Error
		if err != nil {
			return fmt.Errorf("drop placeholders of %s: %w", d.Kind, err)
		}
		err = tx.Exec(`INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation, resource_deleting, tenant)
			SELECT r.id, ?, a.adapter, now(), r.generation, r.deleted_time IS NOT NULL, r.tenant FROM `+d.Table+` r CROSS JOIN unnest(?::text[]) AS a(adapter)
			ON CONFLICT (resource_id, adapter) DO NOTHING`, d.Kind, required).Error
		if err != nil {
			return fmt.Errorf("add placeholders of %s: %w", d.Kind, err)
		}
		return nil
	})
}

// StaleAggregates implements resource.Store.
func (s *Store) StaleAggregates(ctx context.Context, d *resource.Descriptor, afterID string, limit int) ([]string, error) {
	q := s.db.WithContext(ctx).Table(d.Table).Where("aggregated_for <> ?", fingerprint(d))
	if afterID != "" {
		q = q.Where("id > ?", afterID)
	}
	var ids []string
	if err := q.Order("id").Limit(limit).Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("find stale aggregates of %s: %w", d.Kind, err)
	}
	return ids, nil
}
