package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// A status write is two statements in two round trips: LockReports reads, with the transaction's BEGIN, and
// WriteReport writes, with its COMMIT (pipeline.go). Under READ COMMITTED a statement reads the snapshot it started with, which may predate the commit of the
// writer whose lock it waited for; locking the reports too (FOR UPDATE) makes PostgreSQL return each row as that
// writer left it. The rows the aggregate depends on always exist, since every required adapter has a placeholder
// from the resource's creation on, and the upsert's own freshness guard covers the rest.

// reportJSON is one report as row_to_json spells it. Its conditions decode in the same pass as the rest: the
// array is read once, not kept raw and decoded again (as statusRow.toStatus does for a column).
type reportJSON struct {
	ResourceID         string                 `json:"resource_id"`
	Adapter            string                 `json:"adapter"`
	ObservedGeneration int64                  `json:"observed_generation"`
	ObservedTime       *time.Time             `json:"observed_time"`
	Conditions         []conditions.Condition `json:"conditions"`
	Data               json.RawMessage        `json:"data"`
	Metadata           json.RawMessage        `json:"metadata"`
	CreatedTime        time.Time              `json:"created_time"`
	LastReportTime     *time.Time             `json:"last_report_time"`
}

func (t *txStore) LockReports(d *resource.Descriptor, parentID, id string) (*resource.Resource, []resource.AdapterStatus, error) {
	where, args := "id = ?", []any{id}
	if parentID != "" {
		where += " AND parent_id = ?"
		args = append(args, parentID)
	}
	where, args = andTenant(where, args, d, t.scope, "")
	stmt, vars := t.bind(`WITH res AS (SELECT `+columns(d)+` FROM `+d.Table+` WHERE `+where+` FOR UPDATE),
		reps AS (SELECT `+statusColumns+` FROM adapter_statuses WHERE resource_id = (SELECT id FROM res) ORDER BY adapter FOR UPDATE)
		SELECT res.*, (SELECT coalesce(json_agg(reps ORDER BY adapter), '[]') FROM reps) AS reports FROM res`, args...)
	var (
		w     row
		found bool
	)
	// The transaction's first statement: BEGIN goes with it.
	err := t.send(queued{sql: stmt, args: vars, read: scanning(append(w.dest(d), &w.Reports), func() error {
		found = true
		return nil
	})})
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s %s and its reports: %w", d.Kind, id, err)
	}
	if !found {
		return nil, nil, resource.NotFound(d, id)
	}
	r, err := w.toResource(d, true)
	if err != nil {
		return nil, nil, err
	}
	out, err := decodeReports(w.Reports)
	if err != nil {
		return nil, nil, fmt.Errorf("decode the reports on %s %s: %w", d.Kind, id, err)
	}
	return r, out, nil
}

// decodeReports reads a JSON array of adapter_statuses rows (json_agg of the rows); never nil.
func decodeReports(raw []byte) ([]resource.AdapterStatus, error) {
	var reps []reportJSON
	if err := json.Unmarshal(raw, &reps); err != nil {
		return nil, err
	}
	out := make([]resource.AdapterStatus, len(reps))
	for i := range reps {
		rep := &reps[i]
		out[i] = resource.AdapterStatus{ResourceID: rep.ResourceID, Adapter: rep.Adapter, ObservedGeneration: rep.ObservedGeneration,
			Conditions: rep.Conditions, Data: rep.Data, Metadata: rep.Metadata, CreatedTime: rep.CreatedTime.UTC()}
		if rep.ObservedTime != nil {
			out[i].ObservedTime = rep.ObservedTime.UTC()
		}
		if rep.LastReportTime != nil {
			out[i].LastReportTime = rep.LastReportTime.UTC()
		}
	}
	return out, nil
}

func (t *txStore) WriteReport(d *resource.Descriptor, r *resource.Resource, st *resource.AdapterStatus, save bool, event resource.EventType,
	history *resource.HistoryEntry) error {
	conds, err := json.Marshal(st.Conditions)
	if err != nil {
		return fmt.Errorf("encode conditions: %w", err)
	}
	// The guard repeats the service's freshness rule where the row is: a report of an older generation writes
	// nothing, not even the resource (so that it may be sent with the COMMIT, see pipeline.go); at the same
	// generation the later write wins (the rows are locked, so later is the server's order).
	sql := `WITH up AS (INSERT INTO adapter_statuses (resource_id, kind, adapter, observed_generation, observed_time, conditions,
			data, metadata, created_time, last_report_time, resource_generation, resource_deleting, finalized_generation, tenant)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (resource_id, adapter) DO UPDATE SET observed_generation = EXCLUDED.observed_generation,
			observed_time = EXCLUDED.observed_time, conditions = EXCLUDED.conditions, data = EXCLUDED.data,
			metadata = EXCLUDED.metadata, last_report_time = EXCLUDED.last_report_time,
			resource_generation = EXCLUDED.resource_generation, resource_deleting = EXCLUDED.resource_deleting,
			finalized_generation = EXCLUDED.finalized_generation
		WHERE adapter_statuses.observed_generation <= EXCLUDED.observed_generation
		RETURNING 1)`
	args := []any{st.ResourceID, d.Kind, st.Adapter, st.ObservedGeneration, st.ObservedTime, conds, []byte(st.Data),
		[]byte(st.Metadata), st.CreatedTime, st.LastReportTime, r.Generation, r.Deleting(), finalizedGeneration(st), r.Tenant}
	final := `SELECT (SELECT count(*) FROM up) AS written, 0::bigint AS version`
	if save {
		// Only the status moves: its conditions are all that needs encoding (toRow would encode the labels too).
		aggregate, err := json.Marshal(r.Status.Conditions)
		if err != nil {
			return fmt.Errorf("encode conditions: %w", err)
		}
		// A report changes the status only, never the generation or the deleting flag: the reports' copies of
		// those (see Save) stay right.
		sql += `, saved AS (UPDATE ` + d.Table + ` SET phase = ?, conditions = ?, aggregated_for = ?, version = version + 1
				WHERE id = ? AND EXISTS (SELECT 1 FROM up) RETURNING id, version, generation, tenant),
			staged AS (INSERT INTO event_staging (type, kind, resource_id, parent_id, generation, version, tenant)
				SELECT ?, ?, id, ?::uuid, generation, version, tenant FROM saved)`
		args = append(args, string(r.Status.Phase), aggregate, fingerprint(d), r.ID, string(event), d.Kind, nullableID(r.ParentID))
		if history != nil {
			values, err := historyValues(d, r, *history)
			if err != nil {
				return err
			}
			sql += `, history AS (INSERT INTO resource_history (` + historyColumns + `)
				SELECT ?, ?, ?, ?::uuid, ?, ?, ?, ?, ?, ?, ?, ? FROM saved)`
			args = append(args, values...)
		}
		final = `SELECT (SELECT count(*) FROM up) AS written, (SELECT version FROM saved) AS version`
	} else if history != nil {
		return fmt.Errorf("a history entry of %s %s without its save", d.Kind, r.ID)
	}
	stmt, vars := t.bind(sql+" "+final, args...)
	// Deferred: it goes with the COMMIT, or with the next statement.
	var (
		n       int
		written int64
		version *int64
	)
	t.postpone(queued{sql: stmt, args: vars, read: func(rows pgx.Rows) error {
		if err := scanning([]any{&written, &version}, func() error { n++; return nil })(rows); err != nil {
			return fmt.Errorf("store %s's report on %s %s: %w", st.Adapter, d.Kind, r.ID, err)
		}
		if n != 1 || written != 1 {
			return resource.Errorf(resource.CodeStatusStale, "a newer report from %s about %s %s is already stored", st.Adapter, d.Kind, r.ID)
		}
		if save {
			if version == nil {
				return resource.NotFound(d, r.ID)
			}
			r.Version = *version
		}
		return nil
	}})
	return nil
}
