package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// The history of every resource (resource_history) is written in the transaction of the change it records: Create
// inserts its first entry in its one statement, Remove one per removed resource in the statement that stages their
// events, and RecordHistory one row for the other changes. Rows carry the resource's tenant, so row-level security
// guards them like the resources, and they have no foreign key: they outlive the resource for HistoryRetention.

// historyReportJSON is a resource.HistoryReport as the reports column stores it.
type historyReportJSON struct {
	Adapter            string                 `json:"adapter"`
	ObservedGeneration int64                  `json:"observed_generation"`
	Conditions         []conditions.Condition `json:"conditions"`
}

// RecordHistory implements resource.Tx.
func (t *txStore) RecordHistory(d *resource.Descriptor, r *resource.Resource, e resource.HistoryEntry) error {
	values, err := historyValues(d, r, e)
	if err != nil {
		return err
	}
	err = t.db().Exec(`INSERT INTO resource_history (`+historyColumns+`) VALUES (?, ?, ?, ?::uuid, ?, ?, ?, ?, ?, ?, ?, ?)`, values...).Error
	if err != nil {
		return fmt.Errorf("record the %s history of %s %s: %w", e.Action, d.Kind, r.ID, err)
	}
	return nil
}

// historyColumns are what RecordHistory writes of a history entry, in historyValues' order.
const historyColumns = "tenant, kind, resource_id, parent_id, time, actor, action, generation, changes, phase_from, phase_to, reports"

// historyValues are e's values for historyColumns (parent_id wants a ::uuid cast).
func historyValues(d *resource.Descriptor, r *resource.Resource, e resource.HistoryEntry) ([]any, error) {
	var reports []byte
	if len(e.Reports) > 0 {
		out := make([]historyReportJSON, len(e.Reports))
		for i, rep := range e.Reports {
			out[i] = historyReportJSON{Adapter: rep.Adapter, ObservedGeneration: rep.ObservedGeneration, Conditions: rep.Conditions}
		}
		var err error
		if reports, err = json.Marshal(out); err != nil {
			return nil, fmt.Errorf("encode the reports of a history entry: %w", err)
		}
	}
	return []any{r.Tenant, d.Kind, r.ID, nullableID(r.ParentID), e.Time, e.Actor, string(e.Action), e.Generation, nullableJSON(e.Changes),
		nullableText(string(e.PhaseFrom)), nullableText(string(e.PhaseTo)), nullableJSON(reports)}, nil
}

func nullableJSON(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func nullableText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// historyRow is a resource_history row as History reads it.
type historyRow struct {
	Seq        int64
	Time       time.Time
	Actor      string
	Action     string
	Generation int64
	Changes    []byte
	PhaseFrom  *string
	PhaseTo    *string
	Reports    []byte
}

// History implements resource.Store. It is filtered by the caller's tenant (and row-level security) like the
// resources are (the service reads a global kind's unconfined). The resource need not exist.
func (s *Store) History(ctx context.Context, d *resource.Descriptor, parentID, id string, after int64, limit int) ([]resource.HistoryEntry, error) {
	sc := s.scopeOf(ctx)
	where, args := "resource_id = ? AND kind = ?", []any{id, d.Kind}
	if parentID != "" {
		where += " AND parent_id = ?"
		args = append(args, parentID)
	}
	where, args = andTenant(where, args, d, sc, "")
	var rows []historyRow
	err := s.scoped(ctx, sc, func(db *gorm.DB) error {
		err := db.Raw(`SELECT seq, time, actor, action, generation, changes, phase_from, phase_to, reports FROM resource_history
			WHERE `+where+` AND seq > ? ORDER BY seq LIMIT ?`, append(args, after, limit)...).Scan(&rows).Error
		if err != nil || len(rows) > 0 || after == 0 {
			return err
		}
		// An empty page after a cursor is the end of a history only if the history is there at all.
		var found []int
		return rawScan(db.Raw(`SELECT 1 FROM resource_history WHERE `+where+` LIMIT 1`, args...), &found)
	})
	if err != nil {
		return nil, fmt.Errorf("read the history of %s %s: %w", d.Kind, id, err)
	}
	if len(rows) == 0 {
		if after == 0 {
			return nil, resource.NotFound(d, id)
		}
		return nil, nil
	}
	out := make([]resource.HistoryEntry, len(rows))
	for i := range rows {
		w := &rows[i]
		e := resource.HistoryEntry{Seq: w.Seq, Time: w.Time.UTC(), Actor: w.Actor, Action: resource.HistoryAction(w.Action),
			Generation: w.Generation, Changes: w.Changes}
		if w.PhaseFrom != nil {
			e.PhaseFrom = conditions.Phase(*w.PhaseFrom)
		}
		if w.PhaseTo != nil {
			e.PhaseTo = conditions.Phase(*w.PhaseTo)
		}
		if len(w.Reports) > 0 {
			var reps []historyReportJSON
			if err := json.Unmarshal(w.Reports, &reps); err != nil {
				return nil, fmt.Errorf("decode the reports of history entry %d: %w", w.Seq, err)
			}
			e.Reports = make([]resource.HistoryReport, len(reps))
			for j, rep := range reps {
				e.Reports[j] = resource.HistoryReport{Adapter: rep.Adapter, ObservedGeneration: rep.ObservedGeneration, Conditions: rep.Conditions}
			}
		}
		out[i] = e
	}
	return out, nil
}

// historyLease elects the one process that prunes the history.
const historyLease = "history-retention"

// historyPruneBatch bounds one prune statement, so that a large backlog goes in many short transactions.
const historyPruneBatch = 10000

// HistoryPrunerConfig tunes the HistoryPruner.
type HistoryPrunerConfig struct {
	// Pool holds the change feed's own sessions (OpenFeedPool), whose lease table the pruner's lease uses.
	Pool *pgxpool.Pool
	// Retention is how long an entry is kept; it must be positive (keeping the history forever runs no pruner).
	Retention time.Duration
	// Every is how often the pruner looks for old entries (default 1 h).
	Every time.Duration
	// LeaseTTL bounds how long a lost pruner blocks the others (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	Log      *slog.Logger
	// Registerer, when not nil, gets the pruner's metric.
	Registerer prometheus.Registerer
}

// HistoryPruner removes history entries older than the retention. Every API process runs one; a lease lets one
// work at a time.
type HistoryPruner struct {
	cfg    HistoryPrunerConfig
	lease  *Lease
	pruned prometheus.Counter
}

// NewHistoryPruner returns a pruner; Run runs it.
func NewHistoryPruner(cfg HistoryPrunerConfig) (*HistoryPruner, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("the history pruner needs the change feed's pool")
	case cfg.Retention <= 0:
		return nil, fmt.Errorf("history retention %s: must be positive", cfg.Retention)
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Hour
	}
	p := &HistoryPruner{cfg: cfg, lease: NewLease(cfg.Pool, historyLease, cfg.LeaseTTL),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_history_pruned_total",
			Help: "History entries this process removed for retention."})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(p.pruned); err != nil {
			return nil, fmt.Errorf("register history pruner metrics: %w", err)
		}
	}
	return p, nil
}

// Run prunes every Every while it holds the lease, and tries to take it otherwise, until ctx ends.
func (p *HistoryPruner) Run(ctx context.Context) error {
	p.lease.LeadUntilDone(ctx, p.lead, nil, p.cfg.Log, "history pruner")
	return nil
}

func (p *HistoryPruner) lead(ctx context.Context) error {
	tick := time.NewTicker(p.cfg.Every)
	defer tick.Stop()
	for {
		n, err := p.Prune(ctx)
		if err != nil {
			return err
		}
		p.cfg.Log.Info("pruned the history", "removed", n, "retention", p.cfg.Retention.String())
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Prune removes the entries older than the retention, in batches, and returns how many it removed. Each batch's
// statement works only while this pruner holds the lease (ErrLeaseLost otherwise), so two never prune at once.
func (p *HistoryPruner) Prune(ctx context.Context) (int64, error) {
	held, err := p.lease.take(ctx)
	if err != nil {
		return 0, err
	}
	if !held {
		return 0, ErrLeaseLost
	}
	var total int64
	for {
		var n int64
		err := p.cfg.Pool.QueryRow(ctx, `WITH lease AS (`+p.lease.fenceSQL("$3", "$4")+`),
			gone AS (
				DELETE FROM resource_history WHERE EXISTS (SELECT 1 FROM lease) AND seq IN (
					SELECT seq FROM resource_history WHERE time < now() - make_interval(secs => $2) ORDER BY time LIMIT $1)
				RETURNING 1
			)
			SELECT EXISTS (SELECT 1 FROM lease), count(*) FROM gone`,
			historyPruneBatch, p.cfg.Retention.Seconds(), p.lease.name, p.lease.holder).Scan(&held, &n)
		if err != nil {
			return total, fmt.Errorf("prune the history: %w", err)
		}
		if !held {
			return total, ErrLeaseLost
		}
		total += n
		p.pruned.Add(float64(n))
		if n < historyPruneBatch {
			return total, nil
		}
	}
}
