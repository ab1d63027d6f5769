package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// A transaction of InTx holds one pooled connection from start to end and opens and ends its transaction block
// itself, not through database/sql, so that BEGIN travels in the same round trip as the first statement and
// COMMIT in the same as the last: a status write or a create is two round trips, not four. Statements whose rows
// matter on the hot paths (LockReports, WriteReport, Create, CheckQuota) go to pgx directly, the rest through
// GORM on the same connection (db, reader), each after what is queued before it.
//
// A deferred statement (WriteReport, Create) is not sent when called but with the next statement or the COMMIT,
// and its errors surface then. COMMIT travels with deferred statements only while nothing else in the
// transaction may have written (dirty), and a deferred statement writes nothing when it fails its own checks, so
// a commit that went out with a failing one commits nothing.

// queued is a statement waiting for the transaction's next round trip.
type queued struct {
	sql  string
	args []any
	// read takes the statement's rows; nil for a statement whose result only matters if it fails.
	read func(pgx.Rows) error
}

// rollbackTimeout bounds the ROLLBACK of a failed transaction, which runs even when the request's context is done.
const rollbackTimeout = 5 * time.Second

// begin starts t's transaction: BEGIN, and the tenant's role and setting for a confined caller, wait to be sent
// with the first statement.
func (t *txStore) begin() {
	t.pending = append(t.pending, queued{sql: "BEGIN"})
	if !t.scope.all {
		stmt, args := t.bind(confineSQL, confineArgs(t.scope.tenant)...)
		t.pending = append(t.pending, queued{sql: stmt, args: args})
	}
}

// bind turns a statement with GORM's ? placeholders (and its IN ? lists) into PostgreSQL's numbered ones, as GORM
// would send it; nothing is executed. A statement without a list argument binds the same whatever its
// arguments, so its text is kept (the hot paths' statements are a few per kind) and GORM's builder skipped.
func (t *txStore) bind(stmt string, args ...any) (string, []any) {
	if bound, ok := t.store.bound.Load(stmt); ok {
		return bound.(string), args //nolint:forcetypeassert // only bind stores, and it stores strings
	}
	q := t.store.db.Raw(stmt, args...)
	out := q.Statement.SQL.String()
	if !slices.ContainsFunc(args, isList) {
		t.store.bound.Store(stmt, out)
	}
	return out, q.Statement.Vars
}

// isList tells whether GORM expands arg into a list of placeholders: a slice or array, other than bytes.
func isList(arg any) bool {
	switch arg.(type) {
	case []byte, json.RawMessage:
		return false
	}
	k := reflect.ValueOf(arg).Kind()
	return k == reflect.Slice || k == reflect.Array
}

// send runs what is queued and then stmts in one round trip, calling each one's read in order, and returns the
// first error. A statement's error aborts the transaction; what follows it in the round trip is not run.
func (t *txStore) send(stmts ...queued) error {
	t.pending = append(t.pending, stmts...)
	if len(t.pending) == 0 {
		return nil
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(t.pending))}
	for _, q := range t.pending {
		qq := b.Queue(q.sql, q.args...)
		if q.read != nil {
			qq.Query(q.read)
		}
	}
	// A deferred statement that goes out here has written once its read passes: nothing deferred later may take
	// the COMMIT with it (commit).
	t.dirty = t.dirty || t.deferred
	t.pending, t.sent, t.deferred = t.pending[:0], true, false
	return t.raw(func(c *pgx.Conn) error { return c.SendBatch(t.ctx, b).Close() })
}

// raw runs fn on the connection's pgx.Conn.
func (t *txStore) raw(fn func(c *pgx.Conn) error) error {
	return t.conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the database driver's connection is a %T, not pgx's", dc)
		}
		return fn(c.Conn())
	})
}

// scanning is a queued statement's read that scans each row into scans and then calls each (nil: nothing more).
func scanning(scans []any, each func() error) func(pgx.Rows) error {
	if each == nil {
		each = func() error { return nil }
	}
	return func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, scans, each)
		return err
	}
}

// postpone defers stmt, a statement that writes nothing when its read fails, to the next round trip.
func (t *txStore) postpone(stmt queued) {
	t.pending = append(t.pending, stmt)
	t.deferred = true
}

// db is GORM on the transaction's connection for a statement that may write, after what is queued has been sent.
// An error sending it is returned by the statement GORM runs next.
func (t *txStore) db() *gorm.DB {
	t.dirty = true
	return t.reader()
}

// reader is db for a statement that only reads (locks included).
func (t *txStore) reader() *gorm.DB {
	g := t.gdb.Session(&gorm.Session{})
	if err := t.send(); err != nil {
		_ = g.AddError(err) //nolint:errcheck // AddError returns the error it keeps, which the next statement returns
	}
	return g
}

// Flush implements resource.Tx: it sends what is deferred and returns its errors.
func (t *txStore) Flush() error { return t.send() }

// commit ends a transaction whose work succeeded: COMMIT with the deferred statements unless something before
// them may have written, in which case they go first, so that their errors can still roll everything back.
func (t *txStore) commit() error {
	if !t.sent && !t.deferred {
		return nil // no statement was queued: there is no transaction to end
	}
	if t.dirty && t.deferred {
		if err := t.send(); err != nil {
			return err
		}
	}
	return t.send(queued{sql: "COMMIT", read: func(rows pgx.Rows) error {
		rows.Close()
		// COMMIT of a transaction that failed ends it with a rollback; every statement's error is read as it comes,
		// so this means one went unnoticed.
		if tag := rows.CommandTag(); tag.String() == "ROLLBACK" {
			return errors.New("the transaction was rolled back by the database instead of committed")
		}
		return rows.Err()
	}})
}

// rollback ends a transaction that failed, or whose COMMIT failed, unless the database has already ended it. A
// connection in an unknown state is not returned to the pool.
func (t *txStore) rollback() {
	if !t.sent {
		return
	}
	_ = t.raw(func(c *pgx.Conn) error { //nolint:errcheck // the connection is dropped when it fails; the caller has its error
		if c.IsClosed() {
			return driver.ErrBadConn
		}
		if c.PgConn().TxStatus() == 'I' {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), rollbackTimeout)
		defer cancel()
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			return driver.ErrBadConn
		}
		return nil
	})
}

// runTx runs fn in one transaction on one connection of pool.
func (s *Store) runTx(ctx context.Context, pool *sql.DB, sc scope, fn func(tx resource.Tx) error) (err error) {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("take a database connection: %w", err)
	}
	defer func() { _ = conn.Close() }() //nolint:errcheck // Close only returns the connection to the pool
	gdb := s.db.Session(&gorm.Session{Context: ctx, NewDB: true})
	gdb.Statement.ConnPool = conn
	t := &txStore{ctx: ctx, conn: conn, gdb: gdb, store: s, scope: sc, actor: resource.CallerFrom(ctx).Name}
	t.begin()
	done := false
	defer func() {
		if !done || err != nil {
			t.rollback()
		}
	}()
	err = fn(t)
	if err == nil {
		err = t.commit()
	}
	done = true
	return err
}
