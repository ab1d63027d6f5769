package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

var _ resource.TenantStore = (*Store)(nil)

// tenantRow is a tenant as the tenants queries return it: the row's columns (null without a row) and the usage.
type tenantRow struct {
	ID                 string
	MaxClusters        *int64
	MaxNodepoolDevices *int64
	CreatedTime        *time.Time
	UpdatedTime        *time.Time
	UpdatedBy          *string
	UseClusters        int64
	UseNodepoolDevices int64
}

func (w *tenantRow) toTenant() resource.Tenant {
	t := resource.Tenant{ID: w.ID,
		Quotas: resource.Quotas{Clusters: w.MaxClusters, NodePoolDevices: w.MaxNodepoolDevices},
		Usage:  resource.Usage{Clusters: w.UseClusters, NodePoolDevices: w.UseNodepoolDevices}}
	if w.CreatedTime != nil {
		t.CreatedTime, t.UpdatedTime = ptrTo(w.CreatedTime.UTC()), ptrTo(w.UpdatedTime.UTC())
	}
	if w.UpdatedBy != nil {
		t.UpdatedBy = *w.UpdatedBy
	}
	return t
}

func ptrTo[T any](v T) *T { return &v }

// quotaUse is the SQL aggregate of what the rows of a kind use of its quota q: a count, or the sum of a spec
// field (CheckQuota's measure).
func quotaUse(q *resource.QuotaRule) string {
	if q.SpecField == "" {
		return "count(*)"
	}
	return "coalesce(sum(greatest((spec->>'" + q.SpecField + "')::numeric, 0)), 0)::bigint"
}

// usageColumns returns, for each quota of the tenants table, the kind of quotaKinds that uses it (nil: none, which
// uses nothing) under the column name tenantRow scans it by.
func usageColumns(quotaKinds []*resource.Descriptor) ([]string, map[string]*resource.Descriptor, error) {
	names := []string{resource.QuotaClusters, resource.QuotaNodePoolDevices}
	kinds := map[string]*resource.Descriptor{}
	for _, d := range quotaKinds {
		if _, ok := quotaColumn(d.Quota.Name); !ok {
			return nil, nil, fmt.Errorf("quota %q of %s has no column in tenants", d.Quota.Name, d.Kind)
		}
		kinds[d.Quota.Name] = d
	}
	return names, kinds, nil
}

// tenantsSQL returns the statement that reads the tenants whose ids the CTE page (one column, id) selects, in id
// order: each one's quotas from the relation quotas (tenants, or the rows an upsert returned), left-joined so that
// a tenant without a row has null quotas, and its usage, one GROUP BY per quota kind over the page's tenants only.
// ctes defines page and whatever it reads.
func tenantsSQL(ctes, quotas string, quotaKinds []*resource.Descriptor) (string, error) {
	names, kinds, err := usageColumns(quotaKinds)
	if err != nil {
		return "", err
	}
	var sel, joins strings.Builder
	for i, name := range names {
		col := "use_" + name
		d := kinds[name]
		if d == nil {
			fmt.Fprintf(&sel, ", 0::bigint AS %s", col)
			continue
		}
		alias := fmt.Sprintf("u%d", i)
		fmt.Fprintf(&sel, ", coalesce(%s.n, 0) AS %s", alias, col)
		fmt.Fprintf(&joins, "\n\t\tLEFT JOIN (SELECT tenant, %s AS n FROM %s WHERE deleted_time IS NULL AND tenant IN (SELECT id FROM page) GROUP BY tenant) %s ON %s.tenant = page.id",
			quotaUse(d.Quota), d.Table, alias, alias)
	}
	return `WITH ` + ctes + `
		SELECT page.id, t.max_clusters, t.max_nodepool_devices, t.created_time, t.updated_time, t.updated_by` + sel.String() + `
		FROM page LEFT JOIN ` + quotas + ` t ON t.id = page.id` + joins.String() + `
		ORDER BY page.id`, nil
}

// GetTenant implements resource.TenantStore. It runs in the caller's scope, so a confined caller's usage counts
// only rows row-level security lets it see (its own tenant's, which is all the domain lets it ask for).
func (s *Store) GetTenant(ctx context.Context, quotaKinds []*resource.Descriptor, id string) (*resource.Tenant, error) {
	q, err := tenantsSQL(`page AS (SELECT ?::text AS id)`, "tenants", quotaKinds)
	if err != nil {
		return nil, err
	}
	var rows []tenantRow
	err = s.scoped(ctx, s.scopeOf(ctx), func(db *gorm.DB) error { return rawScan(db.Raw(q, id), &rows) })
	if err != nil {
		return nil, fmt.Errorf("read tenant %q: %w", id, err)
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("read tenant %q: %d rows", id, len(rows))
	}
	t := rows[0].toTenant()
	return &t, nil
}

// ListTenants implements resource.TenantStore: the tenants with a row or with live resources of a quota kind. A
// kind's tenants are found on its (tenant, created_time, id) index of live rows.
func (s *Store) ListTenants(ctx context.Context, quotaKinds []*resource.Descriptor, after string, limit int) ([]resource.Tenant, error) {
	ids := []string{`SELECT id FROM tenants`}
	for _, d := range quotaKinds {
		ids = append(ids, `SELECT DISTINCT tenant FROM `+d.Table+` WHERE deleted_time IS NULL`)
	}
	q, err := tenantsSQL(`page AS (SELECT id FROM (`+strings.Join(ids, " UNION ")+`) ids WHERE id > ? ORDER BY id LIMIT ?)`, "tenants", quotaKinds)
	if err != nil {
		return nil, err
	}
	var rows []tenantRow
	err = s.scoped(ctx, s.scopeOf(ctx), func(db *gorm.DB) error { return rawScan(db.Raw(q, after, limit), &rows) })
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]resource.Tenant, len(rows))
	for i := range rows {
		out[i] = rows[i].toTenant()
	}
	return out, nil
}

// PutTenant implements resource.TenantStore: one statement upserts the row and reads it back with its usage.
// Raising or lowering a quota takes the row lock that CheckQuota takes, so it waits for the tenant's creates in
// flight, and those after it see the new limits.
func (s *Store) PutTenant(ctx context.Context, quotaKinds []*resource.Descriptor, id string, q resource.Quotas, by string, at time.Time) (*resource.Tenant, error) {
	// The upsert's result is not visible to the rest of its statement's reads of tenants (they see the snapshot
	// before it), so the read takes the quotas from the rows it returned.
	stmt, err := tenantsSQL(`up AS (
			INSERT INTO tenants (id, max_clusters, max_nodepool_devices, created_time, updated_time, updated_by)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET max_clusters = EXCLUDED.max_clusters,
				max_nodepool_devices = EXCLUDED.max_nodepool_devices, updated_time = EXCLUDED.updated_time,
				updated_by = EXCLUDED.updated_by
			RETURNING *
		), page AS (SELECT id FROM up)`, "up", quotaKinds)
	if err != nil {
		return nil, err
	}
	var rows []tenantRow
	err = s.scoped(ctx, s.scopeOf(ctx), func(db *gorm.DB) error {
		return rawScan(db.Raw(stmt, id, q.Clusters, q.NodePoolDevices, at, at, by), &rows)
	})
	if err != nil {
		return nil, fmt.Errorf("set the quotas of tenant %q: %w", id, err)
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("set the quotas of tenant %q: %d rows", id, len(rows))
	}
	t := rows[0].toTenant()
	return &t, nil
}
