package harness

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", redact(dsn), err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestNewDatabaseGivesIsolatedDatabases(t *testing.T) {
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("both calls returned %s", redact(a))
	}
	connA, connB := connect(t, a), connect(t, b)

	if _, err := connA.Exec(t.Context(), "CREATE TABLE only_in_a (id int); INSERT INTO only_in_a VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := connA.QueryRow(t.Context(), "SELECT count(*) FROM only_in_a").Scan(&n); err != nil || n != 1 {
		t.Fatalf("database a: count = %d, err = %v", n, err)
	}
	var found *string
	if err := connB.QueryRow(t.Context(), "SELECT to_regclass('only_in_a')::text").Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found != nil {
		t.Fatalf("a table created in database a is visible in database b")
	}

	var nameA, nameB string
	_ = connA.QueryRow(t.Context(), "SELECT current_database()").Scan(&nameA)
	_ = connB.QueryRow(t.Context(), "SELECT current_database()").Scan(&nameB)
	if nameA == nameB {
		t.Fatalf("both connections are to database %s", nameA)
	}
}

func TestNewDatabaseIsDroppedAfterTheTest(t *testing.T) {
	var name string
	t.Run("uses a database", func(t *testing.T) {
		_ = connect(t, NewDatabase(t)).QueryRow(t.Context(), "SELECT current_database()").Scan(&name)
	})
	if name == "" {
		t.Fatal("the subtest did not get a database")
	}
	var exists bool
	err := connect(t, os.Getenv(EnvDatabaseURL)).
		QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil || exists {
		t.Fatalf("database %s still exists after its test (err %v)", name, err)
	}
}

// Test processes race to build a template whenever the schema changes; a fresh schema version makes every
// goroutine here take the slow path at once, on connections of its own, as separate processes would.
func TestEnsureTemplateConcurrently(t *testing.T) {
	server := os.Getenv(EnvDatabaseURL)
	version, err := randomName("concurrency-test-")
	if err != nil {
		t.Fatal(err)
	}
	const callers = 4
	names := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		conn := connect(t, server)
		wg.Go(func() { names[i], errs[i] = ensureTemplate(t.Context(), conn, server, version) })
	}
	wg.Wait()

	admin := connect(t, server)
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, "ALTER DATABASE "+ident(names[0])+" IS_TEMPLATE false")
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(names[0]))
	})
	for i := range callers {
		if errs[i] != nil || names[i] != names[0] {
			t.Fatalf("caller %d: template %q, err %v; caller 0: %q", i, names[i], errs[i], names[0])
		}
	}
	var count int
	err = admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname LIKE $1 || '%'", names[0]).
		Scan(&count)
	if err != nil || count != 1 {
		t.Fatalf("want exactly the template %s and no leftover build database, found %d (err %v)", names[0], count, err)
	}
}

// BenchmarkNewDatabase measures what each database-backed test pays to get its database. The databases are
// dropped in the cleanup, after the timing, so bound the count: go test -run '^$' -bench . -benchtime 20x.
func BenchmarkNewDatabase(b *testing.B) {
	for b.Loop() {
		NewDatabase(b)
	}
}
