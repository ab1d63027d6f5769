package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// sqlstateInsufficientPrivilege is what PostgreSQL answers a write that a row-level security policy's WITH CHECK
// refuses.
const sqlstateInsufficientPrivilege = "42501"

// Row-level security is the second wall on its own: in a transaction confined as the store confines a request's,
// queries that forget the tenant filter (every one here does) see and change only the confined tenant's rows, a
// row of another tenant cannot be written, an unset tenant sees nothing, and the owner's session sees everything.
func TestRowLevelSecurityHoldsWithoutTheQueriesFilter(t *testing.T) {
	db := harness.OpenGorm(t, harness.NewDatabase(t))
	for _, tenant := range []string{"a", "b"} {
		tenancySeed(t, db, tenant)
	}

	reads := []struct {
		name, query string
		want        []string // as tenant a
	}{
		{"clusters", `SELECT name FROM clusters ORDER BY name`, []string{"a-one", "a-two", "same"}},
		{"clusters by id of the other tenant", `SELECT name FROM clusters WHERE id = '00000000-0000-0000-0000-0000000000b1'`, nil},
		{"clusters by the other tenant", `SELECT name FROM clusters WHERE tenant = 'b'`, nil},
		{"clusters by a shared name", `SELECT tenant FROM clusters WHERE name = 'same'`, []string{"a"}},
		{"nodepools", `SELECT name FROM nodepools ORDER BY name`, []string{"a-pool"}},
		{"nodepools joined to clusters", `SELECT c.name || '/' || n.name FROM nodepools n JOIN clusters c ON c.id = n.parent_id`, []string{"a-one/a-pool"}},
		{"adapter_statuses", `SELECT adapter || ' of ' || tenant FROM adapter_statuses ORDER BY adapter`, []string{"applier of a", "placer of a"}},
		{"resource_history", `SELECT actor FROM resource_history`, []string{"a-user"}},
		{"counts", `SELECT (SELECT count(*) FROM clusters) || ' ' || (SELECT count(*) FROM nodepools) || ' ' ||
			(SELECT count(*) FROM adapter_statuses) || ' ' || (SELECT count(*) FROM resource_history)`, []string{"3 1 2 1"}},
	}
	for _, tc := range reads {
		t.Run("read "+tc.name, func(t *testing.T) {
			got := tenancyConfined(t, db, "a", func(tx *gorm.DB) []string { return tenancyStrings(t, tx, tc.query) })
			require.Equal(t, tc.want, got)
		})
	}

	writes := []struct {
		name, stmt string
		wantState  string // "" to succeed
		wantRows   int64
	}{
		{"insert a cluster of the other tenant", `INSERT INTO clusters (id, name, phase, created_time, updated_time, created_by, updated_by, tenant)
			VALUES (gen_random_uuid(), 'sneaky', 'Pending', now(), now(), 'x', 'x', 'b')`, sqlstateInsufficientPrivilege, 0},
		{"insert a status of the other tenant", `INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation, tenant)
			VALUES ('00000000-0000-0000-0000-0000000000b1', 'Cluster', 'sneaky', now(), 1, 'b')`, sqlstateInsufficientPrivilege, 0},
		{"insert history of the other tenant", `INSERT INTO resource_history (tenant, kind, resource_id, time, actor, action, generation)
			VALUES ('b', 'Cluster', '00000000-0000-0000-0000-0000000000b1', now(), 'x', 'updated', 1)`, sqlstateInsufficientPrivilege, 0},
		{"move an own cluster to the other tenant", `UPDATE clusters SET tenant = 'b' WHERE name = 'a-one'`, sqlstateInsufficientPrivilege, 0},
		{"update every cluster", `UPDATE clusters SET labels = '{"owned": "yes"}'`, "", 3},
		{"delete the other tenant's node pools", `DELETE FROM nodepools WHERE tenant = 'b'`, "", 0},
		{"delete every status", `DELETE FROM adapter_statuses`, "", 2},
		{"insert an own cluster", `INSERT INTO clusters (id, name, phase, created_time, updated_time, created_by, updated_by, tenant)
			VALUES (gen_random_uuid(), 'fine', 'Pending', now(), now(), 'x', 'x', 'a')`, "", 1},
	}
	for _, tc := range writes {
		t.Run("write "+tc.name, func(t *testing.T) {
			// Each write runs in a transaction that is rolled back, so that the next starts from the seed.
			var rows int64
			err := db.Transaction(func(tx *gorm.DB) error {
				require.NoError(t, postgres.Confine(tx, "a"))
				res := tx.Exec(tc.stmt)
				if res.Error != nil {
					return res.Error
				}
				rows = res.RowsAffected
				return errTenancyRollback
			})
			if tc.wantState != "" {
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr)
				require.Equal(t, tc.wantState, pgErr.Code, pgErr.Message)
				return
			}
			require.ErrorIs(t, err, errTenancyRollback)
			require.Equal(t, tc.wantRows, rows)
		})
	}

	t.Run("an unset tenant sees nothing", func(t *testing.T) {
		// On one connection, after a confined transaction: the setting then exists in the session, empty, rather
		// than missing as on a fresh connection; both match no row.
		require.NoError(t, db.Connection(func(conn *gorm.DB) error {
			for range 2 {
				got := tenancyConfined(t, conn, "", func(tx *gorm.DB) []string {
					return tenancyStrings(t, tx, `SELECT (SELECT count(*) FROM clusters) + (SELECT count(*) FROM nodepools) +
						(SELECT count(*) FROM adapter_statuses) + (SELECT count(*) FROM resource_history) || ''`)
				})
				require.Equal(t, []string{"0"}, got)
				tenancyConfined(t, conn, "a", func(*gorm.DB) []string { return nil })
			}
			return nil
		}))
	})

	t.Run("the owner sees every tenant", func(t *testing.T) {
		require.Equal(t, []string{"a-one", "a-two", "b-one", "b-two", "same", "same"},
			tenancyStrings(t, db, `SELECT name FROM clusters ORDER BY name`))
		require.Equal(t, []string{"a", "b"}, tenancyStrings(t, db, `SELECT DISTINCT tenant FROM resource_history ORDER BY 1`))
	})
}

var errTenancyRollback = errors.New("roll back")

// tenancyConfined runs fn in a transaction confined to tenant ("" sets only the role, as a request whose tenant
// was never named would), rolls it back and returns what fn returned.
func tenancyConfined(tb testing.TB, db *gorm.DB, tenant string, fn func(tx *gorm.DB) []string) []string {
	tb.Helper()
	var got []string
	err := db.Transaction(func(tx *gorm.DB) error {
		if tenant == "" {
			require.NoError(tb, tx.Exec("SELECT set_config('role', ?, true)", postgres.ScopedRole).Error)
		} else {
			require.NoError(tb, postgres.Confine(tx, tenant))
		}
		got = fn(tx)
		return errTenancyRollback
	})
	require.ErrorIs(tb, err, errTenancyRollback)
	return got
}

// tenancyStrings runs a query that returns one text column.
func tenancyStrings(tb testing.TB, db *gorm.DB, query string) []string {
	tb.Helper()
	rows, err := db.Raw(query).Rows()
	require.NoError(tb, err)
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(tb, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(tb, rows.Err())
	return out
}

// tenancySeed writes, as the owner, tenant's clusters <tenant>-one, <tenant>-two and same (a name every tenant
// has), a node pool of the first, two reports on it and a history row. Its first cluster's id ends in 0000b1 for
// tenant b.
func tenancySeed(tb testing.TB, db *gorm.DB, tenant string) {
	tb.Helper()
	one := "00000000-0000-0000-0000-0000000000" + tenant + "1"
	stmts := []string{
		`INSERT INTO clusters (id, name, phase, created_time, updated_time, created_by, updated_by, tenant) VALUES
			('` + one + `', '` + tenant + `-one', 'Pending', now(), now(), 'seed', 'seed', '` + tenant + `'),
			(gen_random_uuid(), '` + tenant + `-two', 'Pending', now(), now(), 'seed', 'seed', '` + tenant + `'),
			(gen_random_uuid(), 'same', 'Pending', now(), now(), 'seed', 'seed', '` + tenant + `')`,
		`INSERT INTO nodepools (id, parent_id, name, phase, created_time, updated_time, created_by, updated_by, tenant) VALUES
			(gen_random_uuid(), '` + one + `', '` + tenant + `-pool', 'Pending', now(), now(), 'seed', 'seed', '` + tenant + `')`,
		`INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation, tenant) VALUES
			('` + one + `', 'Cluster', 'applier', now(), 1, '` + tenant + `'),
			('` + one + `', 'Cluster', 'placer', now(), 1, '` + tenant + `')`,
		`INSERT INTO resource_history (tenant, kind, resource_id, time, actor, action, generation) VALUES
			('` + tenant + `', 'Cluster', '` + one + `', now(), '` + tenant + `-user', 'created', 1)`,
	}
	for _, s := range stmts {
		require.NoError(tb, db.Exec(s).Error)
	}
}

// The migration before tenancy, and tenancy's: released migrations never change, so their IDs are fixed.
const (
	tenancyPreviousMigration = "202612050012_managementclusters"
	tenancyMigration         = "202612050014_tenancy"
)

// tenancyMigrationClusters is the size of the existing single-tenant fleet the tenancy migration is measured on.
const tenancyMigrationClusters = 10_000

// An existing single-tenant database migrates in place: every cluster, node pool, report and event is still
// there, unchanged, in the default tenant, and names are unique per tenant. The migration's duration is logged
// (docs/tenancy.md quotes it), not asserted.
func TestTenancyMigrationKeepsAnExistingFleet(t *testing.T) {
	ctx := t.Context()
	db := harness.OpenGorm(t, tenancyEmptyDatabase(t))
	require.NoError(t, postgres.MigrateTo(ctx, db, tenancyPreviousMigration))
	require.Equal(t, []string{tenancyPreviousMigration}, tenancyStrings(t, db, `SELECT max(id) FROM schema_migrations`))

	// The fleet: n clusters (every tenth soft-deleted and replaced by a live one of the same name), two node
	// pools each, a report of three adapters on each cluster and of one on each pool, and a created event per
	// resource, plus a platform kind's rows.
	fill := []string{
		`INSERT INTO versionstreams (id, name, spec, phase, created_time, updated_time, created_by, updated_by)
			VALUES (gen_random_uuid(), 'stable-4-16', '{"target_version": "4.16"}', 'Ready', now(), now(), 'seed', 'seed')`,
		`INSERT INTO clusters (id, name, labels, spec, generation, phase, created_time, updated_time, created_by, updated_by, deleted_time, deleted_by)
			SELECT gen_random_uuid(), 'cluster-' || i, jsonb_build_object('env', (ARRAY['prod','dev'])[1 + i % 2], 'shard', (i % 100)::text),
				jsonb_build_object('version_stream', 'stable-4-16', 'hosted_cluster', jsonb_build_object('dns', jsonb_build_object('base_domain', 'c' || i || '.example.com'))),
				1 + i % 3, 'Ready', now() - make_interval(secs => i), now(), 'seed', 'seed',
				CASE WHEN i % 10 = 0 THEN now() END, CASE WHEN i % 10 = 0 THEN 'seed' END
			FROM generate_series(1, ` + strconv.Itoa(tenancyMigrationClusters) + `) AS i`,
		`INSERT INTO clusters (id, name, spec, phase, created_time, updated_time, created_by, updated_by)
			SELECT gen_random_uuid(), name, spec, 'Pending', now(), now(), 'seed', 'seed' FROM clusters WHERE deleted_time IS NOT NULL`,
		`INSERT INTO nodepools (id, parent_id, name, spec, phase, created_time, updated_time, created_by, updated_by)
			SELECT gen_random_uuid(), c.id, 'pool-' || p, jsonb_build_object('replicas', p), 'Ready', now(), now(), 'seed', 'seed'
			FROM clusters c CROSS JOIN generate_series(1, 2) AS p`,
		`INSERT INTO adapter_statuses (resource_id, kind, adapter, observed_generation, observed_time, conditions, data, created_time, last_report_time, resource_generation)
			SELECT c.id, 'Cluster', a, c.generation, now(), '[{"type": "Available", "status": "True"}]', jsonb_build_object('n', c.name), now(), now(), c.generation
			FROM clusters c CROSS JOIN unnest('{applier,placer,dns}'::text[]) AS a`,
		`INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation)
			SELECT id, 'NodePool', 'applier', now(), 1 FROM nodepools`,
		`INSERT INTO events (time, type, kind, resource_id, generation, version)
			SELECT created_time, 'created', 'Cluster', id, 1, 1 FROM clusters`,
		`INSERT INTO events (time, type, kind, resource_id, parent_id, generation, version)
			SELECT created_time, 'created', 'NodePool', id, parent_id, 1, 1 FROM nodepools`,
		`INSERT INTO event_staging (type, kind, resource_id, generation, version)
			SELECT 'updated', 'Cluster', id, 2, 2 FROM clusters LIMIT 100`,
		`ANALYZE`,
	}
	for _, s := range fill {
		require.NoError(t, db.Exec(s).Error)
	}
	before := tenancyFingerprint(t, db)
	require.Equal(t, "11000", before["clusters count"], "the fleet as seeded")

	start := time.Now()
	require.NoError(t, postgres.Migrate(ctx, db))
	took := time.Since(start)
	t.Logf("the tenancy migration of %d clusters (%s rows in all) took %s", tenancyMigrationClusters, before["rows"], took.Round(time.Millisecond))

	// Later migrations run too (Migrate goes to the newest); the tenancy one is among them.
	require.Equal(t, []string{tenancyMigration}, tenancyStrings(t, db, `SELECT id FROM schema_migrations WHERE id = '`+tenancyMigration+`'`))
	require.NoError(t, postgres.CheckSchema(ctx, db))
	require.Equal(t, before, tenancyFingerprint(t, db), "what the migration kept")
	for _, table := range []string{"clusters", "nodepools", "versionstreams", "adapter_statuses", "events", "event_staging"} {
		require.Equal(t, []string{"0"}, tenancyStrings(t, db, `SELECT count(*)::text FROM `+table+` WHERE tenant <> 'default'`), table)
	}
	require.Equal(t, []string{"0"}, tenancyStrings(t, db, `SELECT count(*)::text FROM (SELECT 1 FROM clusters
		WHERE deleted_time IS NULL GROUP BY tenant, name HAVING count(*) > 1) AS dup`), "live names that repeat")
	require.Equal(t, []string{"CREATE UNIQUE INDEX clusters_live_name ON public.clusters USING btree (tenant, name) WHERE (deleted_time IS NULL)"},
		tenancyStrings(t, db, `SELECT indexdef FROM pg_indexes WHERE indexname = 'clusters_live_name'`))
	// Names are unique per tenant now, not across the fleet.
	require.NoError(t, db.Exec(`INSERT INTO clusters (id, name, phase, created_time, updated_time, created_by, updated_by, tenant)
		VALUES (gen_random_uuid(), 'cluster-1', 'Pending', now(), now(), 'x', 'x', 'other')`).Error)
	err := db.Exec(`INSERT INTO clusters (id, name, phase, created_time, updated_time, created_by, updated_by)
		VALUES (gen_random_uuid(), 'cluster-1', 'Pending', now(), now(), 'x', 'x')`).Error
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
}

// tenancyFingerprint counts and checksums what the tenancy migration must keep: each kind's (id, name, spec,
// labels) and more, each report and each event.
func tenancyFingerprint(tb testing.TB, db *gorm.DB) map[string]string {
	tb.Helper()
	sums := map[string]string{
		"clusters": `SELECT count(*) || ' ' || md5(string_agg(id::text || name || spec::text || labels::text || generation || phase ||
			coalesce(deleted_time::text, '-') || version, ',' ORDER BY id)) FROM clusters`,
		"nodepools":      `SELECT count(*) || ' ' || md5(string_agg(id::text || parent_id::text || name || spec::text || labels::text, ',' ORDER BY id)) FROM nodepools`,
		"versionstreams": `SELECT count(*) || ' ' || md5(string_agg(id::text || name || spec::text, ',' ORDER BY id)) FROM versionstreams`,
		"adapter_statuses": `SELECT count(*) || ' ' || md5(string_agg(resource_id::text || kind || adapter || observed_generation || conditions::text ||
			data::text || pending, ',' ORDER BY resource_id, adapter)) FROM adapter_statuses`,
		"events": `SELECT count(*) || ' ' || md5(string_agg(seq || type || kind || resource_id::text || coalesce(parent_id::text, '-') || generation,
			',' ORDER BY seq)) FROM events`,
		"event_staging": `SELECT count(*) || ' ' || md5(string_agg(id || resource_id::text, ',' ORDER BY id)) FROM event_staging`,
	}
	out := map[string]string{}
	for name, q := range sums {
		got := tenancyStrings(tb, db, q)
		require.Len(tb, got, 1, name)
		out[name] = got[0]
	}
	out["clusters count"] = tenancyStrings(tb, db, `SELECT count(*)::text FROM clusters`)[0]
	out["rows"] = tenancyStrings(tb, db, `SELECT ((SELECT count(*) FROM clusters) + (SELECT count(*) FROM nodepools) +
		(SELECT count(*) FROM adapter_statuses) + (SELECT count(*) FROM events))::text`)[0]
	return out
}

// tenancyEmptyDatabase creates a database without any schema on the test server (harness.NewDatabase's are
// migrated already), dropped when the test ends, and returns its URL.
func tenancyEmptyDatabase(tb testing.TB) string {
	tb.Helper()
	server := os.Getenv(harness.EnvDatabaseURL)
	require.NotEmpty(tb, server, "harness.Main sets %s", harness.EnvDatabaseURL)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	require.NoError(tb, err)
	defer func() { _ = conn.Close(ctx) }()
	name := "hf_test_tenancy_migration_" + time.Now().Format("150405_000000")
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	require.NoError(tb, err)
	tb.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), server)
		if err != nil {
			tb.Errorf("drop %s: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	require.NoError(tb, err)
	u.Path = "/" + name
	return u.String()
}
