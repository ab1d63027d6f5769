package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migrationLockKey is the pg_advisory_lock key that serialises migrations of replicas started together.
const migrationLockKey = 0x48595046 // "HYPF"

// migrationsTable records applied migrations (gormigrate's bookkeeping).
const migrationsTable = "schema_migrations"

// migrations is the schema's history. Append only: a released migration never changes.
func migrations() []*gormigrate.Migration {
	return []*gormigrate.Migration{
		{
			ID: "202611300003_clusters_nodepools",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, append(kindTableDDL("clusters", "", addedLater()...), kindTableDDL("nodepools", "clusters", addedLater()...)...))
			},
		},
		{
			ID: "202611300004_adapter_statuses",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, []string{
					`CREATE TABLE adapter_statuses (
						resource_id uuid NOT NULL,
						kind text NOT NULL,
						adapter text NOT NULL,
						observed_generation bigint NOT NULL DEFAULT 0,
						observed_time timestamptz,
						conditions jsonb NOT NULL DEFAULT '[]',
						data jsonb NOT NULL DEFAULT '{}',
						metadata jsonb NOT NULL DEFAULT '{}',
						created_time timestamptz NOT NULL,
						last_report_time timestamptz,
						resource_generation bigint NOT NULL,
						resource_deleting boolean NOT NULL DEFAULT false,
						finalized_generation bigint NOT NULL DEFAULT 0,
						pending boolean GENERATED ALWAYS AS (observed_generation < resource_generation
							OR (resource_deleting AND finalized_generation < resource_generation)) STORED,
						PRIMARY KEY (resource_id, adapter)
					)`,
					`ALTER TABLE adapter_statuses SET (fillfactor = 85, autovacuum_vacuum_scale_factor = 0.02,
						autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02)`,
					// An idle adapter's poll reads only this small index: the fleet's settled rows are not in it.
					`CREATE INDEX adapter_statuses_pending ON adapter_statuses (kind, adapter, resource_id) WHERE pending`,
					`CREATE INDEX adapter_statuses_report_time ON adapter_statuses (kind, adapter, last_report_time)`,
					`ALTER TABLE clusters ADD COLUMN aggregated_for text NOT NULL DEFAULT ''`,
					`ALTER TABLE nodepools ADD COLUMN aggregated_for text NOT NULL DEFAULT ''`,
				})
			},
		},
		{
			ID: "202611300005_versionstreams",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, append(kindTableDDL("versionstreams", "", addedLater()...),
					`ALTER TABLE versionstreams ADD COLUMN aggregated_for text NOT NULL DEFAULT ''`))
			},
		},
		{
			ID: "202612010006_upgradeschedules",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, append(kindTableDDL("upgradeschedules", "", addedLater()...),
					`ALTER TABLE upgradeschedules ADD COLUMN aggregated_for text NOT NULL DEFAULT ''`))
			},
		},
		{
			// version changes on every write of a row (labels, spec, status, deletion), unlike generation, which
			// counts spec changes for the adapters: it is the ETag that If-Match compares.
			ID: "202612010007_row_versions",
			Migrate: func(tx *gorm.DB) error {
				var stmts []string
				for _, table := range []string{"clusters", "nodepools", "versionstreams", "upgradeschedules"} {
					stmts = append(stmts, `ALTER TABLE `+table+` ADD COLUMN version bigint NOT NULL DEFAULT 1`)
				}
				return execAll(tx, stmts)
			},
		},
		{
			// Which adapters must report on each kind is the database's, not each replica's: replicas that
			// disagreed flipped aggregates between them, and a changed flag silently removed resources.
			ID: "202612010008_required_adapters",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, []string{`CREATE TABLE required_adapters (
					kind text PRIMARY KEY,
					adapters text[] NOT NULL,
					updated_time timestamptz NOT NULL DEFAULT now()
				)`})
			},
		},
		{
			// The change feed. A write stages its event in its own transaction; one sequencer (whichever API
			// process holds the lock) moves committed events into events in the order it finds them, so that a
			// reader following seq never skips an event that committed late.
			ID: "202612010009_change_feed",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, []string{
					`CREATE TABLE event_staging (
						id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
						time timestamptz NOT NULL DEFAULT clock_timestamp(),
						type text NOT NULL,
						kind text NOT NULL,
						resource_id uuid NOT NULL,
						parent_id uuid,
						generation bigint NOT NULL,
						version bigint NOT NULL
					)`,
					`CREATE TABLE events (
						seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
						time timestamptz NOT NULL,
						type text NOT NULL,
						kind text NOT NULL,
						resource_id uuid NOT NULL,
						parent_id uuid,
						generation bigint NOT NULL,
						version bigint NOT NULL
					)`,
					`CREATE INDEX events_time ON events (time)`,
					// Every statement that stages events wakes the sequencer when its transaction commits: a
					// trigger, so that no write path can forget to.
					`CREATE FUNCTION hyperfleet_wake_sequencer() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN
						PERFORM pg_notify('hyperfleet_staged', '');
						RETURN NULL;
					END $$`,
					`CREATE TRIGGER event_staging_wake AFTER INSERT ON event_staging
						FOR EACH STATEMENT EXECUTE FUNCTION hyperfleet_wake_sequencer()`,
					// One row: how far retention has removed events, so that a reader behind it is told to re-list.
					`CREATE TABLE event_feed (
						id int PRIMARY KEY CHECK (id = 1),
						compacted_through bigint NOT NULL DEFAULT 0
					)`,
					`INSERT INTO event_feed (id) VALUES (1)`,
					// Where each relay (e.g. to NATS JetStream) has got to.
					`CREATE TABLE event_relays (
						name text PRIMARY KEY,
						seq bigint NOT NULL DEFAULT 0,
						updated_time timestamptz NOT NULL DEFAULT now()
					)`,
				})
			},
		},
		{
			// The change feed, exact or saying it is not. Its epoch, renewed by `migrate --renew-feed-epoch` after a
			// restore or a failover, tells positions of a rewound history (whose numbers are handed out again) from
			// current ones. Leadership is a lease row with an expiry on the database's clock rather than a session
			// advisory lock, which a frozen connection held for hours. Writes no longer NOTIFY: the trigger made every
			// write transaction take the database-wide notify lock at commit; the sequencer polls instead.
			ID: "202612010010_feed_epoch_leases",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, []string{
					`ALTER TABLE event_feed ADD COLUMN epoch text NOT NULL DEFAULT ''`,
					`UPDATE event_feed SET epoch = ` + newEpochSQL,
					`CREATE TABLE feed_leases (
						name text PRIMARY KEY,
						holder text NOT NULL,
						expires timestamptz NOT NULL
					)`,
					`DROP TRIGGER event_staging_wake ON event_staging`,
					`DROP FUNCTION hyperfleet_wake_sequencer()`,
				})
			},
		},
		{
			// Management clusters, and the index that counts the clusters placed on one (the cluster-placer's
			// reports name it in data.management_cluster) when an admin deletes it.
			ID: "202612050012_managementclusters",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, append(kindTableDDL("managementclusters", "", tenancyColumns()...),
					// Partial on exactly what ReportReferrers asks, so that no other adapter's write maintains it.
					`CREATE INDEX adapter_statuses_management_cluster ON adapter_statuses ((data->>'management_cluster'))
						WHERE kind = 'Cluster' AND adapter = 'cluster-placer'`))
			},
		},
		{
			// Tenancy: every resource belongs to a tenant (the existing ones to the default tenant, by the columns'
			// constant defaults, which PostgreSQL stores once rather than rewriting each row), names are unique per
			// tenant, and row-level security is the second wall behind the queries' own tenant filter (see
			// tenancyDDL). Then tenants' quotas and limits, and the history of every resource.
			ID:      "202612050014_tenancy",
			Migrate: func(tx *gorm.DB) error { return execAll(tx, tenancyDDL()) },
		},
		{
			// Adapter shard leases: which replica of an adapter reconciles which of its virtual shards. A lease's
			// generation grows on every change of holder, and reports made under a lease carry it, so that the
			// report of a replica that lost the shard is refused (fencing). Members are the replicas that asked
			// lately: the live ones share the shards.
			ID: "202612050015_adapter_shard_leases",
			Migrate: func(tx *gorm.DB) error {
				return execAll(tx, []string{
					`CREATE TABLE adapter_shard_leases (
						adapter text NOT NULL,
						shard integer NOT NULL CHECK (shard >= 0),
						shard_count integer NOT NULL CHECK (shard_count >= 1),
						holder text,
						generation bigint NOT NULL DEFAULT 0,
						renewed_time timestamptz,
						expires_time timestamptz,
						PRIMARY KEY (adapter, shard),
						CHECK (shard < shard_count),
						CHECK ((holder IS NULL) = (expires_time IS NULL))
					)`,
					`CREATE TABLE adapter_shard_members (
						adapter text NOT NULL,
						replica text NOT NULL,
						seen_time timestamptz NOT NULL,
						expires_time timestamptz NOT NULL,
						PRIMARY KEY (adapter, replica)
					)`,
				})
			},
		},
	}
}

// ScopedRole is the database role a request confined to one tenant runs as (SET LOCAL ROLE in its transaction):
// it owns no table, so the tables' row-level security policies apply to it, and it sees only the rows of the
// tenant its transaction names in the setting TenantSetting. Roles belong to the server, not one database, so
// every HyperFleet database on a server shares it.
const ScopedRole = "hyperfleet_scoped"

// TenantSetting is the run-time setting that names the tenant of a scoped transaction (SET LOCAL).
const TenantSetting = "hyperfleet.tenant"

// tenantedTables are the tables whose rows belong to a tenant and that row-level security guards.
func tenantedTables() []string {
	return []string{"clusters", "nodepools", "adapter_statuses", "resource_history"}
}

// tenancyDDL is the tenancy migration's statements.
func tenancyDDL() []string {
	var stmts []string
	for _, t := range []string{"clusters", "nodepools", "versionstreams", "upgradeschedules", "managementclusters"} {
		stmts = append(stmts,
			`ALTER TABLE `+t+` ADD COLUMN tenant text NOT NULL DEFAULT '`+defaultTenant+`'`,
			`ALTER TABLE `+t+` ADD COLUMN deletion_protection boolean NOT NULL DEFAULT false`)
	}
	// Root kinds' names become unique per tenant (a node pool's are unique per cluster, so per tenant already);
	// a tenant's lists walk their own index rather than filter the fleet's.
	for _, t := range []string{"clusters", "versionstreams", "upgradeschedules", "managementclusters"} {
		stmts = append(stmts, `DROP INDEX `+t+`_live_name`,
			`CREATE UNIQUE INDEX `+t+`_live_name ON `+t+` (tenant, name) WHERE deleted_time IS NULL`)
	}
	for _, t := range []string{"clusters", "nodepools", "versionstreams", "upgradeschedules", "managementclusters"} {
		stmts = append(stmts, `CREATE INDEX `+t+`_tenant_live_created ON `+t+` (tenant, created_time, id) WHERE deleted_time IS NULL`)
	}
	for _, t := range []string{"adapter_statuses", "event_staging", "events"} {
		stmts = append(stmts, `ALTER TABLE `+t+` ADD COLUMN tenant text NOT NULL DEFAULT '`+defaultTenant+`'`)
	}
	stmts = append(stmts,
		// A tenant's quotas, set by admins (PUT /tenants/{tenant}); a tenant without a row, or a null quota, has
		// no limit.
		`CREATE TABLE tenants (
			id text PRIMARY KEY,
			max_clusters bigint CHECK (max_clusters >= 0),
			max_nodepool_devices bigint CHECK (max_nodepool_devices >= 0),
			created_time timestamptz NOT NULL,
			updated_time timestamptz NOT NULL,
			updated_by text NOT NULL
		)`,
		// Who changed what and when, kept apart from the change feed and longer (its own retention): spec and
		// labels as the merge patch of each change, and the aggregate's phase changes with the reports that
		// caused them. Rows outlive their resource, so its history can be read after it is gone.
		`CREATE TABLE resource_history (
			seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			tenant text NOT NULL,
			kind text NOT NULL,
			resource_id uuid NOT NULL,
			parent_id uuid,
			time timestamptz NOT NULL,
			actor text NOT NULL,
			action text NOT NULL,
			generation bigint NOT NULL,
			changes jsonb,
			phase_from text,
			phase_to text,
			reports jsonb
		)`,
		`CREATE INDEX resource_history_resource ON resource_history (resource_id, seq)`,
		`CREATE INDEX resource_history_time ON resource_history (time)`,
		// The role that scoped requests run as. Creating it needs CREATEROLE; a server where the migrating user
		// lacks it needs a DBA to create it once (docs/tenancy.md). Concurrent migrations of two databases on one
		// server may race to create it: the loser finds it made.
		`DO $$
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '`+ScopedRole+`') THEN
				BEGIN
					CREATE ROLE `+ScopedRole+` NOLOGIN NOINHERIT;
				EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
				END;
			END IF;
			IF NOT pg_has_role(current_user, '`+ScopedRole+`', 'MEMBER') THEN
				EXECUTE format('GRANT `+ScopedRole+` TO %I', current_user);
			END IF;
		END $$`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO `+ScopedRole,
		`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO `+ScopedRole,
		`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO `+ScopedRole,
		`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO `+ScopedRole,
	)
	// The second wall. The owner (the API's own connection, for admins, adapters and background work) is exempt
	// from row-level security by PostgreSQL's rule; the scoped role is not, and an unset tenant matches nothing.
	for _, t := range tenantedTables() {
		stmts = append(stmts, `ALTER TABLE `+t+` ENABLE ROW LEVEL SECURITY`,
			`CREATE POLICY tenant_isolation ON `+t+` USING (tenant = current_setting('`+TenantSetting+`', true))
				WITH CHECK (tenant = current_setting('`+TenantSetting+`', true))`)
	}
	return stmts
}

// defaultTenant is resource.DefaultTenant as the migration spells it: released migrations never change, so it
// does not follow the constant.
const defaultTenant = "default"

// SchemaVersion is the ID of the newest migration this binary knows; serve refuses a database at another one.
func SchemaVersion() string {
	m := migrations()
	return m[len(m)-1].ID
}

// addedLater are the columns of the table template that released migrations added to the first kinds' tables by
// ALTER TABLE after creating them without: those migrations create their tables without these columns, so that
// they stay as released.
func addedLater() []string { return append([]string{"aggregated_for", "version"}, tenancyColumns()...) }

// tenancyColumns are the template's columns that the tenancy migration added to every kind's table.
func tenancyColumns() []string { return []string{"tenant", "deletion_protection"} }

// kindColumns are the columns of every kind's table after id (and parent_id for a child kind), in order.
func kindColumns() [][2]string {
	return [][2]string{
		{"name", "text NOT NULL"},
		{"labels", "jsonb NOT NULL DEFAULT '{}'"},
		{"spec", "jsonb NOT NULL DEFAULT '{}'"},
		{"generation", "bigint NOT NULL DEFAULT 1"},
		{"phase", "text NOT NULL"},
		{"conditions", "jsonb NOT NULL DEFAULT '[]'"},
		{"created_time", "timestamptz NOT NULL"},
		{"updated_time", "timestamptz NOT NULL"},
		{"created_by", "text NOT NULL"},
		{"updated_by", "text NOT NULL"},
		{"deleted_time", "timestamptz"},
		{"deleted_by", "text"},
		// The required adapters the stored aggregate was computed for: a change of them re-aggregates.
		{"aggregated_for", "text NOT NULL DEFAULT ''"},
		// version changes on every write of a row (labels, spec, status, deletion), unlike generation, which counts
		// spec changes for the adapters: it is the ETag that If-Match compares.
		{"version", "bigint NOT NULL DEFAULT 1"},
		// The tenant the resource belongs to (a global kind's rows keep the default), and its delete guard.
		{"tenant", "text NOT NULL DEFAULT '" + defaultTenant + "'"},
		{"deletion_protection", "boolean NOT NULL DEFAULT false"},
	}
}

// KindTableMigration is the migration that adds a kind: its table from the one template, with every column the
// generic store reads, its storage settings and its indexes. parentTable names the parent kind's table for a child
// kind. A new kind's migration is appended to migrations() as
//
//	KindTableMigration("<yyyymmddhhmm>_<plural>", "<plural>", "")
func KindTableMigration(id, table, parentTable string) *gormigrate.Migration {
	return &gormigrate.Migration{ID: id, Migrate: func(tx *gorm.DB) error { return execAll(tx, kindTableDDL(table, parentTable)) }}
}

// kindTableDDL is the table template: the statements that create one kind's table with every column but those
// named in without (which released migrations added later), so that the generic store can serve it.
func kindTableDDL(table, parentTable string, without ...string) []string {
	parentCol, uniqueCols := "", "name"
	if !slices.Contains(without, "tenant") {
		uniqueCols = "tenant, name"
	}
	if parentTable != "" {
		parentCol = fmt.Sprintf("\n\t\t\tparent_id uuid NOT NULL REFERENCES %s (id) ON DELETE CASCADE,", parentTable)
		uniqueCols = "parent_id, name"
	}
	var cols []string
	for _, c := range kindColumns() {
		if !slices.Contains(without, c[0]) {
			cols = append(cols, c[0]+" "+c[1])
		}
	}
	stmts := []string{
		fmt.Sprintf("CREATE TABLE %s (\n\t\t\tid uuid PRIMARY KEY,%s\n\t\t\t%s\n\t\t)", table, parentCol, strings.Join(cols, ",\n\t\t\t")),
		// Every adapter report rewrites its resource's aggregate, so these tables churn: room on each page keeps
		// updates HOT, and vacuuming early keeps counts index-only and the planner's statistics current.
		fmt.Sprintf(`ALTER TABLE %s SET (fillfactor = 85, autovacuum_vacuum_scale_factor = 0.02,
			autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02)`, table),
		// Names are unique among live rows only, enforced by the index so concurrent creates cannot both win.
		fmt.Sprintf(`CREATE UNIQUE INDEX %[1]s_live_name ON %[1]s (%[2]s) WHERE deleted_time IS NULL`, table, uniqueCols),
		// Lists show live rows unless include_deleted: partial indexes match those queries whatever the planner's
		// statistics say, and each ends in id, the tie-breaker of every order.
		fmt.Sprintf(`CREATE INDEX %[1]s_live_created ON %[1]s (created_time, id) WHERE deleted_time IS NULL`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_live_updated ON %[1]s (updated_time, id) WHERE deleted_time IS NULL`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_live_name_order ON %[1]s (name, id) WHERE deleted_time IS NULL`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_live_generation ON %[1]s (generation, id) WHERE deleted_time IS NULL`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_created ON %[1]s (created_time, id)`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_phase ON %[1]s (phase)`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_deleting ON %[1]s (deleted_time) WHERE deleted_time IS NOT NULL`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_labels ON %[1]s USING gin (labels jsonb_path_ops)`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_spec ON %[1]s USING gin (spec jsonb_path_ops)`, table),
		fmt.Sprintf(`CREATE INDEX %[1]s_conditions ON %[1]s USING gin (conditions jsonb_path_ops)`, table),
	}
	if !slices.Contains(without, "tenant") {
		// A tenant's lists walk its own rows.
		stmts = append(stmts, fmt.Sprintf(`CREATE INDEX %[1]s_tenant_live_created ON %[1]s (tenant, created_time, id) WHERE deleted_time IS NULL`, table))
	}
	if parentTable != "" {
		// Serves nested lists and the ON DELETE CASCADE of a removed parent.
		stmts = append(stmts, fmt.Sprintf(`CREATE INDEX %[1]s_parent ON %[1]s (parent_id, created_time, id)`, table))
	}
	return stmts
}

func execAll(tx *gorm.DB, stmts []string) error {
	for _, s := range stmts {
		if err := tx.Exec(s).Error; err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(s)[0:3], err)
		}
	}
	return nil
}

// Migrate brings the schema to the latest version, then applies extra (the tables of a build's own kinds, such as
// the throwaway-kind test's: KindTableMigration). It is idempotent and safe to run from several processes at once:
// it holds a Postgres advisory lock on one pinned connection while it works.
func Migrate(ctx context.Context, db *gorm.DB, extra ...*gormigrate.Migration) error {
	return db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		if err := conn.Exec("SELECT pg_advisory_lock(?)", migrationLockKey).Error; err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		// Unlock on the same connection; a failure here only delays other migrators until the session ends.
		defer conn.Exec("SELECT pg_advisory_unlock(?)", migrationLockKey)
		opts := *gormigrate.DefaultOptions
		opts.TableName = migrationsTable
		opts.UseTransaction = true
		if err := gormigrate.New(conn, &opts, append(migrations(), extra...)).Migrate(); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	})
}

// ErrSchemaOutdated is returned by CheckSchema when the database lags behind (or is ahead of) this binary.
var ErrSchemaOutdated = errors.New("database schema is not at this binary's version")

// CheckSchema returns ErrSchemaOutdated (wrapped with both versions and what to do) unless the newest applied
// migration is SchemaVersion.
func CheckSchema(ctx context.Context, db *gorm.DB) error {
	var applied []string
	err := rawScan(db.WithContext(ctx).Raw("SELECT id FROM "+migrationsTable), &applied)
	if err != nil {
		// A fresh database has no bookkeeping table yet: that is "outdated", not a failure to report as such.
		if isUndefinedTable(err) {
			return fmt.Errorf("%w: no migrations applied; run `hyperfleet-api migrate`", ErrSchemaOutdated)
		}
		return fmt.Errorf("read schema version: %w", err)
	}
	have := map[string]bool{}
	for _, id := range applied {
		have[id] = true
	}
	for _, m := range migrations() {
		if !have[m.ID] {
			return fmt.Errorf("%w: migration %s is not applied; run `hyperfleet-api migrate`", ErrSchemaOutdated, m.ID)
		}
	}
	return nil
}
