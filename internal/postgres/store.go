// Package postgres stores resources in PostgreSQL through GORM: one table per kind with the same columns,
// versioned migrations, and the compiler from TSL search expressions to parameterised SQL. Transactions (InTx)
// talk to pgx directly on the hot paths, pipelining BEGIN and COMMIT with their statements (pipeline.go).
package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Store is the resource.Store on PostgreSQL.
type Store struct {
	db       *gorm.DB
	children map[*resource.Descriptor][]*resource.Descriptor
	// written, when set, is called after every write that committed: it pokes this process's sequencer, which
	// otherwise learns of staged events only at its next poll.
	written func()
	// tenancy confines callers to their tenant (EnableTenancy).
	tenancy bool
	// bound keeps statements as bind turned them into PostgreSQL's placeholders, by their text with GORM's.
	bound sync.Map
}

var _ resource.Store = (*Store)(nil)

// NewStore returns a Store for the given kinds; every kind the store is asked about must be among them.
func NewStore(db *gorm.DB, kinds []*resource.Descriptor) *Store {
	children := map[*resource.Descriptor][]*resource.Descriptor{}
	for _, k := range kinds {
		if k.Parent != nil {
			children[k.Parent] = append(children[k.Parent], k)
		}
	}
	return &Store{db: db, children: children}
}

// OnWrite makes fn be called after every write that committed (Sequencer.Poke). Call it before the store serves.
func (s *Store) OnWrite(fn func()) { s.written = fn }

// wrote calls the OnWrite hook.
func (s *Store) wrote() {
	if s.written != nil {
		s.written()
	}
}

// row is a resource as stored; it never leaves this package.
type row struct {
	ID         string
	ParentID   *string
	Name       string
	Labels     []byte
	Spec       []byte
	Generation int64
	Version    int64
	Phase      string
	Conditions []byte
	// AggregatedFor fingerprints the required adapters the status was aggregated for.
	AggregatedFor string
	CreatedTime   time.Time
	UpdatedTime   time.Time
	CreatedBy     string
	UpdatedBy     string
	DeletedTime   *time.Time
	DeletedBy     *string
	Tenant        string
	// DeletionProtection is the resource's delete guard.
	DeletionProtection bool
	// Reports is set by LockReports only: the resource's reports as one JSON array.
	Reports []byte
}

// dest is where a row of columns(d) scans to, in its order.
func (w *row) dest(d *resource.Descriptor) []any {
	dest := make([]any, 0, 17)
	if d.Parent != nil {
		dest = append(dest, &w.ParentID)
	}
	return append(dest, &w.ID, &w.Name, &w.Labels, &w.Spec, &w.Generation, &w.Version, &w.Phase, &w.Conditions,
		&w.CreatedTime, &w.UpdatedTime, &w.CreatedBy, &w.UpdatedBy, &w.DeletedTime, &w.DeletedBy, &w.Tenant, &w.DeletionProtection)
}

const rootColumns = "id, name, labels, spec, generation, version, phase, conditions, created_time, updated_time, created_by, updated_by, deleted_time, deleted_by, tenant, deletion_protection"

func columns(d *resource.Descriptor) string {
	if d.Parent == nil {
		return rootColumns
	}
	return "parent_id, " + rootColumns
}

func toRow(d *resource.Descriptor, r *resource.Resource) (*row, error) {
	labels, err := json.Marshal(r.Labels)
	if err != nil {
		return nil, fmt.Errorf("encode labels: %w", err)
	}
	conds, err := json.Marshal(r.Status.Conditions)
	if err != nil {
		return nil, fmt.Errorf("encode conditions: %w", err)
	}
	out := &row{
		ID: r.ID, Name: r.Name, Labels: labels, Spec: r.Spec, Generation: r.Generation, Phase: string(r.Status.Phase),
		Conditions: conds, CreatedTime: r.CreatedTime, UpdatedTime: r.UpdatedTime, CreatedBy: r.CreatedBy,
		UpdatedBy: r.UpdatedBy, DeletedTime: r.DeletedTime, AggregatedFor: fingerprint(d), Tenant: r.Tenant,
		DeletionProtection: r.DeletionProtection,
	}
	if r.ParentID != "" {
		out.ParentID = &r.ParentID
	}
	if r.DeletedBy != "" {
		out.DeletedBy = &r.DeletedBy
	}
	return out, nil
}

// toResource converts a row; with typed false the conditions stay raw JSON (see resource.Status.RawConditions).
func (w *row) toResource(d *resource.Descriptor, typed bool) (*resource.Resource, error) {
	r := &resource.Resource{
		ID: w.ID, Kind: d.Kind, Name: w.Name, Spec: json.RawMessage(w.Spec), Generation: w.Generation, Version: w.Version,
		Status:      resource.Status{Phase: conditions.Phase(w.Phase)},
		CreatedTime: w.CreatedTime.UTC(), UpdatedTime: w.UpdatedTime.UTC(), CreatedBy: w.CreatedBy, UpdatedBy: w.UpdatedBy,
		Tenant: w.Tenant, DeletionProtection: w.DeletionProtection,
	}
	if w.ParentID != nil {
		r.ParentID = *w.ParentID
	}
	if w.DeletedTime != nil {
		t := w.DeletedTime.UTC()
		r.DeletedTime = &t
	}
	if w.DeletedBy != nil {
		r.DeletedBy = *w.DeletedBy
	}
	if !typed {
		r.RawLabels, r.Status.RawConditions = json.RawMessage(w.Labels), json.RawMessage(w.Conditions)
		return r, nil
	}
	if err := json.Unmarshal(w.Labels, &r.Labels); err != nil {
		return nil, fmt.Errorf("decode labels of %s %s: %w", d.Kind, w.ID, err)
	}
	if err := json.Unmarshal(w.Conditions, &r.Status.Conditions); err != nil {
		return nil, fmt.Errorf("decode conditions of %s %s: %w", d.Kind, w.ID, err)
	}
	return r, nil
}

// Create implements resource.Store. It is one statement, so one round trip and no explicit transaction (unless the
// caller is confined to a tenant: see scoped): the parent check (FOR SHARE, so that a concurrent delete of the
// parent waits and its cascade sees the child), the referenced rows' check (FOR KEY SHARE, so that their delete
// waits and then sees the new referrer), the insert, the required adapters' placeholder reports and the history's
// first entry all happen in it.
func (s *Store) Create(ctx context.Context, d *resource.Descriptor, r *resource.Resource, refs []resource.NamedRef) (*resource.Resource, error) {
	sc := s.scopeOf(ctx)
	err := s.scoped(ctx, sc, func(db *gorm.DB) error { return create(db, sc, d, r, refs) })
	if err != nil {
		return nil, err
	}
	s.wrote()
	return r, nil
}

// Create implements resource.Tx: Store.Create inside the transaction, deferred (see pipeline.go): r's tenant is
// set, and the errors are returned, when it has been sent.
func (t *txStore) Create(d *resource.Descriptor, r *resource.Resource, refs []resource.NamedRef) (*resource.Resource, error) {
	stmt, args, err := createStatement(t.scope, d, r, refs)
	if err != nil {
		return nil, err
	}
	stmt, args = t.bind(stmt, args...)
	var o createOutcome
	t.postpone(queued{sql: stmt, args: args, read: func(rows pgx.Rows) error {
		return o.check(d, r, refs, scanning([]any{&o.Parents, &o.Inserted, &o.Missing, &o.Tenant}, nil)(rows))
	}})
	return r, nil
}

// create inserts r in one statement and sets its tenant (a child's is its parent's) as stored.
func create(db *gorm.DB, sc scope, d *resource.Descriptor, r *resource.Resource, refs []resource.NamedRef) error {
	stmt, args, err := createStatement(sc, d, r, refs)
	if err != nil {
		return err
	}
	var o createOutcome
	err = rawScan(db.Raw(stmt, args...), &o)
	return o.check(d, r, refs, err)
}

// createOutcome is what create's statement says it did: a resource is inserted only when its parent exists and is
// not deleting and every reference exists; otherwise the statement writes nothing.
type createOutcome struct {
	Parents, Inserted, Missing int
	Tenant                     *string
}

// check turns the statement's outcome, or its error, into create's, and sets r's tenant as stored.
func (o *createOutcome) check(d *resource.Descriptor, r *resource.Resource, refs []resource.NamedRef, err error) error {
	if err != nil {
		if sqlstate(err) == sqlstateUniqueViolation {
			return nameTaken(d, r.Name)
		}
		return fmt.Errorf("insert %s: %w", d.Kind, err)
	}
	switch {
	case o.Parents == 0:
		return resource.NotFound(d.Parent, r.ParentID)
	case o.Missing >= 0:
		return resource.MissingReference(refs[o.Missing])
	case o.Inserted == 0:
		return resource.Errorf(resource.CodeParentDeleting, "%s %s is being deleted: no new %s can be created in it", d.Parent.Kind, r.ParentID, d.Kind)
	}
	if o.Tenant != nil {
		r.Tenant = *o.Tenant
	}
	return nil
}

// createStatement is create's one statement (its columns: parents, inserted, missing, tenant) and its arguments.
func createStatement(sc scope, d *resource.Descriptor, r *resource.Resource, refs []resource.NamedRef) (string, []any, error) {
	w, err := toRow(d, r)
	if err != nil {
		return "", nil, err
	}
	cols := "id, name, labels, spec, generation, phase, conditions, aggregated_for, created_time, updated_time, created_by, updated_by, deletion_protection"
	values := "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
	insertArgs := []any{w.ID, w.Name, w.Labels, w.Spec, w.Generation, w.Phase, w.Conditions, w.AggregatedFor, w.CreatedTime, w.UpdatedTime,
		w.CreatedBy, w.UpdatedBy, w.DeletionProtection}
	var (
		ctes, sources, conds, counts []string
		args                         []any
	)
	if d.Parent != nil {
		where, whereArgs := andTenant("id = ?", []any{r.ParentID}, d.Parent, sc, "")
		ctes = append(ctes, "parent AS (SELECT deleted_time, tenant FROM "+d.Parent.Table+" WHERE "+where+" FOR SHARE)")
		args = append(args, whereArgs...)
		sources, conds = append(sources, "parent"), append(conds, "parent.deleted_time IS NULL")
		counts = append(counts, "(SELECT count(*) FROM parent) AS parents")
		// A child belongs to its parent's tenant.
		cols += ", parent_id, tenant"
		values += ", ?, parent.tenant"
		insertArgs = append(insertArgs, r.ParentID)
	} else {
		counts = append(counts, "1 AS parents")
		cols += ", tenant"
		values += ", ?"
		insertArgs = append(insertArgs, w.Tenant)
	}
	for i, ref := range refs {
		name := fmt.Sprintf("ref%d", i)
		ctes = append(ctes, name+" AS (SELECT 1 FROM "+ref.Kind.Table+" WHERE name = ? AND deleted_time IS NULL FOR KEY SHARE)")
		args = append(args, ref.Name)
		sources = append(sources, name)
	}
	from := ""
	if len(sources) > 0 {
		from = " FROM " + strings.Join(sources, ", ")
		if len(conds) > 0 {
			from += " WHERE " + strings.Join(conds, " AND ")
		}
	}
	ctes = append(ctes, "ins AS (INSERT INTO "+d.Table+" ("+cols+") SELECT "+values+from+" RETURNING id, tenant, labels, spec)")
	args = append(args, insertArgs...)
	if len(d.RequiredAdapters) > 0 {
		// Adapter names are DNS labels, so the array literal needs no quoting; it is still a parameter.
		ctes = append(ctes, `placeholders AS (INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation, tenant)
			SELECT ins.id, ?, a.adapter, ?, ?, ins.tenant FROM ins CROSS JOIN unnest(?::text[]) AS a(adapter))`)
		args = append(args, d.Kind, w.CreatedTime, w.Generation, "{"+strings.Join(d.RequiredAdapters, ",")+"}")
	}
	ctes = append(ctes, `staged AS (INSERT INTO event_staging (type, kind, resource_id, parent_id, generation, version, tenant)
		SELECT 'created', ?, ins.id, ?::uuid, ?, 1, ins.tenant FROM ins)`,
		`history AS (INSERT INTO resource_history (tenant, kind, resource_id, parent_id, time, actor, action, generation, changes, phase_to)
		SELECT ins.tenant, ?, ins.id, ?::uuid, ?, ?, 'created', ?, jsonb_build_object('labels', ins.labels, 'spec', ins.spec), ? FROM ins)`)
	args = append(args, d.Kind, nullableID(r.ParentID), w.Generation,
		d.Kind, nullableID(r.ParentID), w.CreatedTime, w.CreatedBy, w.Generation, w.Phase)
	// The index of the first missing reference, or -1.
	missing := "-1"
	for i := len(refs) - 1; i >= 0; i-- {
		missing = fmt.Sprintf("CASE WHEN NOT EXISTS (SELECT 1 FROM ref%d) THEN %d ELSE %s END", i, i, missing)
	}
	counts = append(counts, "(SELECT count(*) FROM ins) AS inserted", missing+" AS missing", "(SELECT tenant FROM ins) AS tenant")
	return "WITH " + strings.Join(ctes, ", ") + " SELECT " + strings.Join(counts, ", "), args, nil
}

func nameTaken(d *resource.Descriptor, name string) error {
	scope := ""
	if d.Parent != nil {
		scope = " in this " + d.Parent.Kind
	}
	return &resource.Error{Code: resource.CodeNameTaken, Message: fmt.Sprintf("a %s named %q already exists%s", d.Kind, name, scope),
		Fields: []resource.FieldError{{Field: "name", Message: "is already in use"}}}
}

// Get implements resource.Store.
func (s *Store) Get(ctx context.Context, d *resource.Descriptor, parentID, id string) (*resource.Resource, error) {
	sc := s.scopeOf(ctx)
	var out *resource.Resource
	err := s.scoped(ctx, sc, func(db *gorm.DB) error {
		var err error
		out, err = get(db, sc, d, parentID, id, false)
		return err
	})
	return out, err
}

func get(tx *gorm.DB, sc scope, d *resource.Descriptor, parentID, id string, lock bool) (*resource.Resource, error) {
	// Plain SQL: this runs on every read and every write, and GORM's query builder costs more than the query.
	stmt := "SELECT " + columns(d) + " FROM " + d.Table + " WHERE id = ?"
	args := []any{id}
	if parentID != "" {
		stmt += " AND parent_id = ?"
		args = append(args, parentID)
	}
	stmt, args = andTenant(stmt, args, d, sc, "")
	if lock {
		stmt += " FOR UPDATE"
	}
	var got *row
	if _, err := scanRows(tx.Raw(stmt, args...), d, false, false, func(w *row) error {
		c := *w
		got = &c
		return nil
	}); err != nil {
		return nil, fmt.Errorf("get %s %s: %w", d.Kind, id, err)
	}
	if got == nil {
		return nil, resource.NotFound(d, id)
	}
	// Locked rows are about to be changed and re-aggregated, which needs typed conditions.
	return got.toResource(d, lock)
}

// orderColumns are the fields a list may be ordered by; each has an index ending in id.
var orderColumns = map[string]string{
	"id": "id", "name": "name", "generation": "generation", "created_time": "created_time", "updated_time": "updated_time",
}

// List implements resource.Store: one query for the page, read row by row, and one for the total unless the
// page tells it or it is not wanted. A page after a cursor starts where the cursor's row was, so deep pages cost
// what the first does.
func (s *Store) List(ctx context.Context, d *resource.Descriptor, opts resource.ListOptions, each func(*resource.Resource) error) (resource.ListResult, error) {
	sc := s.scopeOf(ctx)
	var out resource.ListResult
	err := s.scoped(ctx, sc, func(db *gorm.DB) error {
		var err error
		out, err = s.list(db, sc, d, opts, each)
		return err
	})
	return out, err
}

func (s *Store) list(db *gorm.DB, sc scope, d *resource.Descriptor, opts resource.ListOptions, each func(*resource.Resource) error) (resource.ListResult, error) {
	var out resource.ListResult
	keys, err := orderKeys(opts.Order)
	if err != nil {
		return out, err
	}
	order := orderClause(keys)
	where := func() (*gorm.DB, error) {
		q := db.Table(d.Table)
		if cond, args := tenantCond(d, sc, ""); cond != "" {
			q = q.Where(cond, args...)
		}
		if opts.ParentID != "" {
			q = q.Where("parent_id = ?", opts.ParentID)
		}
		if opts.IDs != nil {
			q = q.Where("id IN ?", opts.IDs)
		}
		if !opts.IncludeDeleted {
			q = q.Where("deleted_time IS NULL")
		}
		if opts.PendingFor != "" {
			q = pendingFor(q, d, opts.PendingFor, opts.ResyncAfter)
		}
		if strings.TrimSpace(opts.Search) != "" {
			var hidden func([]string) bool
			if opts.SearchPublic {
				hidden = d.Spec.IsInternal
			}
			cond, args, err := CompileSearch(opts.Search, d.Parent != nil, hidden)
			if err != nil {
				return nil, err
			}
			q = q.Where(cond, args...)
		}
		return q, nil
	}
	q, err := where()
	if err != nil {
		return out, err
	}
	cols, err := listColumns(d, opts)
	if err != nil {
		return out, err
	}
	selectCols := func(q *gorm.DB) *gorm.DB {
		if len(opts.Statuses) == 0 {
			return q.Select(cols)
		}
		// Adapter names are DNS labels, so the array literal needs no quoting; it is still a parameter.
		return q.Select(cols+", "+reportsColumn(d), "{"+strings.Join(opts.Statuses, ",")+"}")
	}
	var page *gorm.DB
	switch {
	case opts.After != "":
		cond, args, err := afterWhere(keys, opts.After)
		if err != nil {
			return out, err
		}
		page = selectCols(q.Session(&gorm.Session{})).Where(cond, args...).Order(order).Limit(opts.Size)
	case opts.Page <= 1:
		page = selectCols(q.Session(&gorm.Session{})).Order(order).Limit(opts.Size)
	default:
		// Skipping rows costs per row skipped: skip them in the narrow ordered index (an index-only scan when the
		// filters allow) and fetch only the page's wide rows. The offset is a parameter, so that every page of a
		// list is one statement, prepared and planned once per connection rather than once per page number; the
		// limit stays a constant, which the planner sizes the join by.
		ids := q.Session(&gorm.Session{}).Select("id").Order(order)
		page = selectCols(db.Table(d.Table)).Where("id IN (? LIMIT "+strconv.Itoa(opts.Size)+" OFFSET ?)", ids, offset(opts)).Order(order)
	}
	n, last, err := s.eachRow(page, d, opts.Borrow, len(opts.Statuses) > 0, each)
	if err != nil {
		return out, err
	}
	if n == opts.Size && last != nil {
		out.Next = nextCursor(keys, last)
	}
	switch {
	case opts.NoCount:
		return out, nil
	case opts.After == "" && n < opts.Size && (n > 0 || opts.Page <= 1):
		// A short numbered page already tells the total: the rows it skipped and the rows it holds.
		out.Total, out.Counted = offset(opts)+int64(n), true
		return out, nil
	}
	if q, err = where(); err != nil {
		return out, err
	}
	if opts.EstimateCount {
		estimate, err := planRows(db, q)
		if err != nil {
			return out, fmt.Errorf("estimate the count of %s: %w", d.Kind, err)
		}
		if estimate >= exactBelow {
			out.Total, out.Counted, out.Estimated = estimate, true, true
			return out, nil
		}
		if q, err = where(); err != nil {
			return out, err
		}
	}
	// count(*) with no column reads the narrowest index that the filters allow, without the rows (an index-only
	// scan where the visibility map says the pages are all visible).
	if err := q.Count(&out.Total).Error; err != nil {
		return out, fmt.Errorf("count %s: %w", d.Kind, err)
	}
	out.Counted = true
	return out, nil
}

// exactBelow is the estimate under which a count asked to be estimated is counted anyway: counting that many
// index entries costs about what planning the estimate does, and a small total is one a client can check.
const exactBelow = 1000

// offset is the rows a numbered page skips.
func offset(opts resource.ListOptions) int64 {
	if opts.After != "" || opts.Page <= 1 {
		return 0
	}
	return int64(opts.Page-1) * int64(opts.Size)
}

// planRows returns the planner's estimate of the rows q matches, from its statistics and without reading them:
// EXPLAIN's "Plan Rows" of the query's top node.
func planRows(db, q *gorm.DB) (int64, error) {
	rows, err := db.Raw("EXPLAIN (FORMAT JSON) ?", q.Select("1")).Rows()
	if err != nil {
		return 0, err
	}
	defer func() { _ = rows.Close() }() //nolint:errcheck // Err below reports what went wrong while reading
	var plan []byte
	for rows.Next() {
		if err := rows.Scan(&plan); err != nil {
			return 0, err
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) != 1 {
		return 0, fmt.Errorf("read the plan %.200q: %w", plan, err)
	}
	return int64(out[0].Plan.Rows), nil
}

// eachRow runs query and hands its rows to each one at a time, reading the next only once each has returned; it
// returns how many it handed over and the last one's keys. With borrow (ListOptions.Borrow) a resource's raw JSON
// is the driver's buffer, valid only until each returns. With reports the query also selects reportsColumn, which
// becomes the resource's AdapterStatuses.
func (s *Store) eachRow(query *gorm.DB, d *resource.Descriptor, borrow, reports bool, each func(*resource.Resource) error) (int, *row, error) {
	var last row
	n, err := scanRows(query, d, borrow, reports, func(w *row) error {
		r, err := w.toResource(d, false)
		if err != nil {
			return err
		}
		if reports {
			if r.AdapterStatuses, err = decodeReports(w.Reports); err != nil {
				return fmt.Errorf("decode the reports on %s %s: %w", d.Kind, w.ID, err)
			}
		}
		if err := each(r); err != nil {
			return err
		}
		// The next page's cursor needs only the keys, which are small.
		last = row{ID: w.ID, Name: w.Name, Generation: w.Generation, CreatedTime: w.CreatedTime, UpdatedTime: w.UpdatedTime}
		return nil
	})
	if err != nil {
		return n, nil, fmt.Errorf("list %s: %w", d.Kind, err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	return n, &last, nil
}

// scanRows runs query, which selects columns(d) (and reportsColumn after them with reports), and hands each row to
// fn, scanned by position: GORM's scan by reflection costs more than the rest of reading a row. The row is reused:
// fn copies what it keeps. With borrow its JSON columns are the driver's buffer, valid only until fn returns.
func scanRows(query *gorm.DB, d *resource.Descriptor, borrow, reports bool, fn func(*row) error) (int, error) {
	rows, err := query.Rows()
	if err != nil {
		return 0, err
	}
	defer func() { _ = rows.Close() }() //nolint:errcheck // Err below reports what went wrong while reading
	var (
		w                   row
		labels, spec, conds sql.RawBytes
		reps                sql.RawBytes
	)
	dest := w.dest(d)
	if borrow {
		at := 0
		if d.Parent != nil {
			at = 1 // past parent_id
		}
		dest[at+2], dest[at+3], dest[at+7] = &labels, &spec, &conds
	}
	if reports {
		// Decoded before fn returns (eachRow), so the driver's buffer will do.
		dest = append(dest, &reps)
	}
	n := 0
	for rows.Next() {
		w = row{}
		if err := rows.Scan(dest...); err != nil {
			return n, err
		}
		if borrow {
			w.Labels, w.Spec, w.Conditions = labels, spec, conds
		}
		if reports {
			w.Reports = reps
		}
		if err := fn(&w); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// nullableID is a parent id as a parameter: nil (SQL NULL) for a root kind.
func nullableID(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// listColumns is columns(d), with the spec's internal fields removed as PostgreSQL reads the rows when opts asks
// (#- on each path: cheaper there than decoding and encoding every spec here).
func listColumns(d *resource.Descriptor, opts resource.ListOptions) (string, error) {
	if opts.KeysOnly {
		// The wide JSON columns are what a row costs to read and send; constants keep the row's shape.
		return keysOnly.Replace(columns(d)), nil
	}
	if !opts.WithoutInternal {
		return columns(d), nil
	}
	paths, ok := d.Spec.InternalPaths()
	if !ok {
		return "", fmt.Errorf("the internal fields of %s cannot be left out by path", d.Kind)
	}
	spec := "spec"
	for _, path := range paths {
		for _, name := range path {
			if !plainName.MatchString(name) {
				return "", fmt.Errorf("internal field %q of %s: not a plain property name", name, d.Kind)
			}
		}
		spec = "(" + spec + " #- '{" + strings.Join(path, ",") + "}')"
	}
	return strings.Replace(columns(d), " spec,", " "+spec+" AS spec,", 1), nil
}

// keysOnly turns columns(d) into the columns of a KeysOnly list.
var keysOnly = strings.NewReplacer(" labels,", " '{}'::jsonb AS labels,", " spec,", " '{}'::jsonb AS spec,",
	" conditions,", " '[]'::jsonb AS conditions,")

// plainName is a property name that is safe in a text[] literal as it is.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// rawScan is GORM's Scan without its trace: Scan records every statement for the logger with its arguments
// formatted in (logger.ExplainSQL), whether or not anything is logged, which was ~7% of a status write's CPU.
// Statements still go through GORM's callbacks and logger, which formats only what it logs.
func rawScan(q *gorm.DB, dest any) error {
	rows, err := q.Rows()
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }() //nolint:errcheck // Err below reports what went wrong while reading
	if rows.Next() {
		if err := q.ScanRows(rows, dest); err != nil {
			return err
		}
	}
	return rows.Err()
}
