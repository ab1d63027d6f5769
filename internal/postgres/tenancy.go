package postgres

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Tenancy is enforced twice. The first wall is every query's own tenant filter (tenantCond), added where a
// request's scope is read (scopeOf). The second is row-level security: a request confined to a tenant runs in a
// transaction that switches to ScopedRole and names the tenant (scoped), so that a query which forgot the filter
// still sees only that tenant's rows. Callers who see every tenant (admins, adapters, the API's background work)
// keep the owner's session, which the policies exempt; that is decided only from resource.Caller.AllTenants.

// scope is what one request may see.
type scope struct {
	tenant string
	all    bool
}

// scopeOf returns the scope of ctx's caller; with tenancy off every caller sees everything (one tenant).
func (s *Store) scopeOf(ctx context.Context) scope {
	if !s.tenancy {
		return scope{all: true}
	}
	c := resource.CallerFrom(ctx)
	if c.AllTenants {
		return scope{all: true}
	}
	return scope{tenant: c.Tenant}
}

// EnableTenancy confines callers to their tenant (resource.Caller.Tenant) unless they see all tenants. Call it
// before the store serves, once CheckTenancy has passed.
func (s *Store) EnableTenancy() { s.tenancy = true }

// CheckTenancy returns an error that says what to do when the database cannot enforce tenancy for the API's
// connection: the scoped role is missing, or the connection's user may not switch to it.
func CheckTenancy(ctx context.Context, db *gorm.DB) error {
	var ok []bool
	err := rawScan(db.WithContext(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ?)
		AND pg_has_role(current_user, ?, 'MEMBER')`, ScopedRole, ScopedRole), &ok)
	if err != nil {
		return fmt.Errorf("check the tenancy role: %w", err)
	}
	if len(ok) != 1 || !ok[0] {
		return fmt.Errorf("tenancy needs the database role %s, granted to the API's database user: run `hyperfleet-api migrate` "+
			"as a user with CREATEROLE, or have a DBA run `CREATE ROLE %s NOLOGIN NOINHERIT; GRANT %s TO <api user>`",
			ScopedRole, ScopedRole, ScopedRole)
	}
	return nil
}

// scoped runs fn on ctx's scope: directly on the pool for a caller who sees every tenant, else in a transaction
// confined to the caller's tenant by role and setting. fn may run again only if it returns a retryable error
// from InTx; elsewhere it runs once.
func (s *Store) scoped(ctx context.Context, sc scope, fn func(db *gorm.DB) error) error {
	db := s.db.WithContext(ctx)
	if sc.all {
		return fn(db)
	}
	return db.Transaction(func(tx *gorm.DB) error {
		if err := confine(tx, sc.tenant); err != nil {
			return err
		}
		return fn(tx)
	})
}

// confineSQL makes the rest of a transaction run as ScopedRole in a tenant (confineArgs): both settings end with
// the transaction.
const confineSQL = "SELECT set_config('role', ?, true), set_config(?, ?, true)"

func confineArgs(tenant string) []any { return []any{ScopedRole, TenantSetting, tenant} }

// confine runs confineSQL in tx.
func confine(tx *gorm.DB, tenant string) error {
	if err := tx.Exec(confineSQL, confineArgs(tenant)...).Error; err != nil {
		return fmt.Errorf("confine the transaction to its tenant: %w", err)
	}
	return nil
}

// tenantCond is the first wall: the condition (with its argument) that keeps a query of d's table, aliased as
// alias ("" for none), to sc's tenant, or "" when d is global or sc sees every tenant.
func tenantCond(d *resource.Descriptor, sc scope, alias string) (string, []any) {
	if sc.all || !d.Tenanted {
		return "", nil
	}
	col := "tenant"
	if alias != "" {
		col = alias + ".tenant"
	}
	return col + " = ?", []any{sc.tenant}
}

// andTenant appends tenantCond to a WHERE clause and its arguments.
func andTenant(where string, args []any, d *resource.Descriptor, sc scope, alias string) (string, []any) {
	cond, more := tenantCond(d, sc, alias)
	if cond == "" {
		return where, args
	}
	return where + " AND " + cond, append(args, more...)
}

// quotaColumn returns the column of tenants that holds the quota named name (resource.QuotaRule.Name).
func quotaColumn(name string) (string, bool) {
	switch name {
	case resource.QuotaClusters:
		return "max_clusters", true
	case resource.QuotaNodePoolDevices:
		return "max_nodepool_devices", true
	}
	return "", false
}

// CheckQuota implements resource.Tx: it locks the tenant's row (so that concurrent creates of one tenant check
// one after another, each seeing what the one before committed) and refuses amount more of d's quota when the
// tenant's live resources of d already use too much of it. A tenant without a row, or without that quota, has
// no limit. excludeID, when set, is a resource whose current use the new amount replaces (an update).
func (t *txStore) CheckQuota(d *resource.Descriptor, tenant, excludeID string, amount int64) error {
	q := d.Quota
	column, ok := quotaColumn(q.Name)
	if !ok {
		return fmt.Errorf("quota %q of %s has no column in tenants", q.Name, d.Kind)
	}
	// Both statements only read, so the create that follows may still travel with the COMMIT (pipeline.go).
	var limit *int64
	stmt, args := t.bind("SELECT "+column+" FROM tenants WHERE id = ? FOR UPDATE", tenant)
	err := t.send(queued{sql: stmt, args: args, read: scanning([]any{&limit}, nil)})
	if err != nil {
		return fmt.Errorf("lock the quota of tenant %q: %w", tenant, err)
	}
	if limit == nil {
		return nil
	}
	use := quotaUse(q)
	where, whereArgs := "tenant = ? AND deleted_time IS NULL", []any{tenant}
	if excludeID != "" {
		where += " AND id <> ?"
		whereArgs = append(whereArgs, excludeID)
	}
	var current int64
	stmt, args = t.bind("SELECT "+use+" FROM "+d.Table+" WHERE "+where, whereArgs...)
	err = t.send(queued{sql: stmt, args: args, read: scanning([]any{&current}, nil)})
	if err != nil {
		return fmt.Errorf("count the %s quota of tenant %q: %w", q.Name, tenant, err)
	}
	if current+amount > *limit {
		return resource.QuotaExceeded(q.Name, tenant, current, amount, *limit)
	}
	return nil
}
