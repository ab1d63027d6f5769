package postgres_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// Fixed ids of the seeded rows, so that expressions can name them.
const (
	alphaID = "0193a0b2-0000-7000-8000-00000000000a"
	betaID  = "0193a0b2-0000-7000-8000-00000000000b"
	gammaID = "0193a0b2-0000-7000-8000-00000000000c"
	deltaID = "0193a0b2-0000-7000-8000-00000000000d"
)

// searchSeed is an expression for the fuzzer to start from and for TestSearchSeedsRun to run.
type searchSeed struct {
	expr      string
	hasParent bool
}

func searchSeeds() []searchSeed {
	return []searchSeed{
		{"name = 'alpha'", false},
		{"name != 'alpha' and generation >= 2", false},
		{"labels.env = 'prod'", false},
		{"labels.env != 'prod'", true},
		{"labels.env in ['prod', 'dev'] or labels.env not in ['qa']", false},
		{"labels[app-name] like 'w%' or labels.team ilike 'A'", false},
		{"labels.app.kubernetes.io/name is not null or labels.team between 'a' and 'b'", true},
		{"spec.replicas > 2", false},
		{"not (spec.replicas > 2)", true},
		{"spec.replicas between 1 and 3.5 or spec.replicas <= -1", false},
		{"spec.region = 'us-east' or spec.region is null", false},
		{"spec.nested.deep.x = 'y' and spec.nested.deep is not null", false},
		{"spec.enabled = true or spec.enabled != false or spec.tags = 'x'", true},
		{"spec.region ilike 'US%' and spec.region not like '%\\\\%'", false},
		{"spec.version >= '4.14' and spec[weird-key] like '_'", false},
		{"status.phase in ['Ready', 'Deleting'] and status.phase > 'A'", false},
		{"status.conditions.Ready = 'True'", false},
		{"status.conditions.Available != 'True' or status.conditions.Ready in ['False', 'Unknown']", true},
		{"status.conditions.Ready is null", false},
		{"id like '0193%' and id != '" + betaID + "'", false},
		{"id = 'not-a-uuid' or id in ['" + alphaID + "', 'x'] or id < 'z'", false},
		{"owner_id = '" + alphaID + "' or owner_id like '0%'", true},
		{"created_time > 2024-01-01 and updated_time <= 2030-01-01T00:00:00Z", false},
		{"deleted_time is not null or deleted_time between 2024-01-01 and '2024-12-31T23:59:59.999+01:00'", false},
		{"deleted_time != 2024-07-01", true},
		{"generation = -1 or (name like 'a\\\\%' and not (name ilike '%Z'))", false},
		{"spec.replicas < 1.7976931348623157e308 and spec.replicas > 5e-324 or generation >= -9223372036854775808", false},
		{"created_time > 0000-01-01T00:00:00+23:59 or updated_time < 9999-12-31T23:59:59.999999999-23:59", false},
		{"name ilike '%ß_\\\\_%' or labels.team like 'ǅ%' or spec.region like '\\\\%%'", false},
		{"name in ['a', 'b', 'c'] and spec.x in [1, 'x', true, -2.5] and status.conditions.A not in ['True']", true},
		{strings.Repeat("(name = 'a' or ", 45) + "name = 'z'" + strings.Repeat(")", 45), false},
		{strings.Repeat("not (", 60) + "generation = 1" + strings.Repeat(")", 60), true},
		// Injection attempts: each is a parse error, an unknown field or a bind argument that matches nothing.
		{"name = 'x''; drop table clusters; --'", false},
		{"labels.a'b = 1", false},
		{"spec.a.b) or 1=1 --", false},
		{`name = "x' or '1'='1"`, false},
		{`name = 'robert\'); DROP TABLE clusters;--'`, true},
		{"labels.env = '\\') or true; --'", false},
		{"spec.a[b'); drop table nodepools; --] = 1", false},
		{"labels[x') or true or ('] = 'a'", false},
		{"name like '%\\\\'", false},
		{"spec.x > 1e300P or generation = 1e19", false},
	}
}

// seedSearchRows inserts four clusters and three nodepools whose labels, spec and conditions cover the shapes a
// search must cope with: missing keys, JSON nulls, arrays where objects are expected, numbers and strings in the
// same place, and backslashes in the data (which a bad LIKE pattern only trips over when a row is long enough).
func seedSearchRows(tb testing.TB, db *gorm.DB) {
	tb.Helper()
	const insertCluster = `INSERT INTO clusters (id, name, labels, spec, generation, phase, conditions,
		created_time, updated_time, created_by, updated_by, deleted_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'test', 'test', ?)`
	const insertNodePool = `INSERT INTO nodepools (id, parent_id, name, labels, spec, generation, phase, conditions,
		created_time, updated_time, created_by, updated_by) VALUES (?, ?, ?, ?, ?, 1, 'Ready', ?, now(), now(), 'test', 'test')`
	rows := []struct {
		sql  string
		args []any
	}{
		{insertCluster, []any{alphaID, "alpha",
			`{"env": "prod", "app-name": "web", "team": "a", "app.kubernetes.io/name": "x"}`,
			`{"replicas": 3, "region": "us-east", "nested": {"deep": {"x": "y"}}, "tags": ["x", "y"], "enabled": true, "version": "4.15"}`,
			1, "Ready", `[{"type": "Ready", "status": "True"}, {"type": "Available", "status": "True"}]`,
			"2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", nil}},
		{insertCluster, []any{betaID, "beta", `{"env": "dev"}`,
			`{"replicas": 1, "region": "eu-west\\long\\", "weird-key": "\\"}`,
			2, "NotReady", `[{"type": "Ready", "status": "False"}]`,
			"2024-06-01T00:00:00Z", "2024-06-01T00:00:00Z", nil}},
		{insertCluster, []any{gammaID, "gamma", `{}`,
			`{"replicas": "many", "region": null, "nested": [{"deep": {"x": "y"}}], "enabled": "true"}`,
			5, "Deleting", `[]`, "2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "2024-07-01T00:00:00Z"}},
		{insertCluster, []any{deltaID, "delta", `{"env": "prod"}`,
			`{"replicas": 5.5, "enabled": false, "version": 4.14}`,
			3, "Ready", `[{"type": "Ready", "status": "Unknown"}]`,
			"2023-01-01T00:00:00Z", "2023-01-01T00:00:00Z", nil}},
		{insertNodePool, []any{"0193a0b2-0000-7000-8000-0000000000a1", alphaID, "pool-a1", `{"env": "prod"}`,
			`{"replicas": 3, "platform": {"hivelocity": {"region": "us-east"}}}`, `[{"type": "Ready", "status": "True"}]`}},
		{insertNodePool, []any{"0193a0b2-0000-7000-8000-0000000000a2", alphaID, "pool-a2", `{}`,
			`{"replicas": 0}`, `[]`}},
		{insertNodePool, []any{"0193a0b2-0000-7000-8000-0000000000b1", betaID, "pool-b1", `{"env": "dev"}`,
			`{"replicas": "2"}`, `[{"type": "Ready", "status": "False"}]`}},
	}
	for _, r := range rows {
		require.NoError(tb, db.Exec(r.sql, r.args...).Error)
	}
}

// searchDB returns a fresh migrated database holding the seeded rows. Statements time out, so that a search
// that makes Postgres work hard fails the test instead of hanging it.
func searchDB(tb testing.TB) *gorm.DB {
	tb.Helper()
	db := harness.OpenGorm(tb, harness.NewDatabase(tb)+"&statement_timeout=5000")
	seedSearchRows(tb, db)
	return db
}

// countMatches counts the rows of table that the search matches; table is a constant of these tests.
func countMatches(tb testing.TB, db *gorm.DB, table, sql string, args []any) (int64, error) {
	tb.Helper()
	var n int64
	err := db.Raw("SELECT count(*) FROM "+table+" WHERE "+sql, args...).Scan(&n).Error
	return n, err
}

// checkSearch compiles expr and, if it compiles, runs it on the nodepools table and, for a root kind, on the
// clusters table. It fails the test if CompileSearch panics, returns an error that is not CodeBadSearch, or
// returns SQL that Postgres rejects. It returns the clusters count (nodepools for hasParent) and whether expr
// compiled.
func checkSearch(t *testing.T, db *gorm.DB, expr string, hasParent bool) (int64, bool) {
	t.Helper()
	sql, args, err := postgres.CompileSearch(expr, hasParent, nil)
	if err != nil {
		var re *resource.Error
		if !errors.As(err, &re) || re.Code != resource.CodeBadSearch || re.Message == "" {
			t.Fatalf("CompileSearch(%q, %v) error = %#v, want a *resource.Error with CodeBadSearch", expr, hasParent, err)
		}
		return 0, false
	}
	n, err := countMatches(t, db, "nodepools", sql, args)
	if err != nil {
		t.Fatalf("search %q on nodepools: SQL %s %#v: %v", expr, sql, args, err)
	}
	if !hasParent {
		if n, err = countMatches(t, db, "clusters", sql, args); err != nil {
			t.Fatalf("search %q on clusters: SQL %s %#v: %v", expr, sql, args, err)
		}
	}
	return n, true
}

func FuzzCompileSearch(f *testing.F) {
	for _, s := range searchSeeds() {
		f.Add(s.expr, s.hasParent)
	}
	db := searchDB(f)
	f.Fuzz(func(t *testing.T, expr string, hasParent bool) {
		checkSearch(t, db, expr, hasParent)
	})
}

// TestSearchSeedsRun runs every fuzz seed against Postgres, and checks that searches select the right rows.
func TestSearchSeedsRun(t *testing.T) {
	db := searchDB(t)

	t.Run("seeds", func(t *testing.T) {
		for _, s := range searchSeeds() {
			checkSearch(t, db, s.expr, s.hasParent)
		}
		// The injection attempts did nothing to the tables.
		for table, want := range map[string]int64{"clusters": 4, "nodepools": 3} {
			n, err := countMatches(t, db, table, "TRUE", nil)
			require.NoError(t, err)
			require.Equal(t, want, n, table)
		}
	})

	tests := []struct {
		expr      string
		hasParent bool
		want      int64 // matching clusters, or nodepools when hasParent
	}{
		{"labels.env = 'prod'", false, 2},
		{"labels.env != 'prod'", false, 2}, // beta, and gamma, which has no env label
		{"not (labels.env = 'prod')", false, 2},
		{"labels.env is null", false, 1},
		{"labels[app-name] = 'web' and labels.app.kubernetes.io/name = 'x'", false, 1},
		{"spec.replicas > 2", false, 2}, // alpha 3, delta 5.5; not gamma's "many"
		{"not (spec.replicas > 2)", false, 2},
		{"spec.replicas >= 0", true, 2}, // pool-b1's "2" is a string
		{"spec.replicas = '2'", true, 1},
		{"spec.version > '4.14'", false, 1}, // alpha's "4.15"; delta's 4.14 is a number
		{"spec.enabled > 0", false, 0},      // jsonb orders booleans above numbers; a search does not
		{"spec.nested > 'a'", false, 0},     // nor objects and arrays above strings
		{"spec.region is null", false, 2},   // gamma's null, delta's missing
		{"spec.region like '%\\\\\\\\%'", false, 1},
		{"spec.nested.deep.x = 'y'", false, 1},       // not gamma's, which is under an array
		{"spec.nested.deep.x is not null", false, 1}, // same for extraction
		{"spec.enabled = true", false, 1},
		{"spec.enabled != true", false, 3},
		{"spec.tags = 'x'", false, 0}, // an array does not equal its element
		{"spec.platform.hivelocity.region = 'us-east'", true, 1},
		{"status.conditions.Ready = 'True'", false, 1},
		{"status.conditions.Ready != 'True'", false, 3},
		{"status.conditions.Ready is null", false, 1},
		{"status.conditions.Ready in ['False', 'Unknown']", false, 2},
		{"status.phase = 'Ready' and generation between 2 and 5", false, 1},
		{"name in ['alpha', 'gamma'] or name like '%lt%'", false, 3},
		{"id = '" + alphaID + "'", false, 1},
		{"id like '0193a0b2-%-00000000000_'", false, 4},
		{"id != 'nonsense'", false, 4},
		{"owner_id = '" + alphaID + "'", true, 2},
		{"owner_id in ['" + betaID + "', 'nonsense']", true, 1},
		{"created_time >= 2024-06-01", false, 2},
		{"created_time < 2024-01-01T00:00:01+00:00", false, 2},
		{"deleted_time is null", false, 3},
		{"deleted_time != 2024-07-01", false, 3},
		{"not (deleted_time = 2024-07-01)", false, 3},
		{`name = "x' or '1'='1"`, false, 0},
		{`name = 'robert\'); DROP TABLE clusters;--'`, false, 0},
		{"labels.env = '\\') or true; --'", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, ok := checkSearch(t, db, tt.expr, tt.hasParent)
			require.True(t, ok, "expression does not compile")
			require.Equal(t, tt.want, got)
		})
	}
}
