// Package harness gives tests real PostgreSQL databases.
//
// Each test binary gets one server: an existing one named by HYPERFLEET_TEST_DATABASE_URL, else a container that
// Main starts with testcontainers, else the machine's own PostgreSQL on 127.0.0.1:5432. Each NewDatabase call
// gets a fresh database on it, cloned from a migrated template so that the migrations run once per schema version
// rather than once per test.
//
// A test package opts in with
//
//	func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
//
// Templates are named hyperfleet_tpl_<hash of postgres.SchemaVersion()> and are kept on the server so later runs
// reuse them. A container starts empty every time, but on a long-lived server (HYPERFLEET_TEST_DATABASE_URL) a
// migration edited in place under the same ID keeps the old template: drop it, and old ones, with
// ALTER DATABASE <name> IS_TEMPLATE false; DROP DATABASE <name>;
package harness

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	hfpostgres "github.com/hyperfleet/hyperfleet/internal/postgres"
)

const (
	// EnvDatabaseURL names the variable holding the URL of a PostgreSQL server on which the tests may create and
	// drop databases, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable. When it is set, Main uses
	// that server instead of starting a container.
	EnvDatabaseURL = "HYPERFLEET_TEST_DATABASE_URL"

	// EnvPostgresImage names the variable holding the image that Main starts when EnvDatabaseURL is not set.
	EnvPostgresImage = "HYPERFLEET_TEST_POSTGRES_IMAGE"

	// DefaultPostgresImage is the image Main starts when EnvPostgresImage is not set.
	DefaultPostgresImage = "postgres:15"

	// LocalServerURL is the server Main falls back to when neither EnvDatabaseURL nor a container is to be had:
	// the PostgreSQL that our development and CI machines run, with trust authentication for user postgres.
	LocalServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

	// localConnectTimeout bounds the check that the local server answers.
	localConnectTimeout = 5 * time.Second

	// LocalPostgresImage is the image that test/postgres-image/build.sh builds for machines without access to a
	// container registry.
	LocalPostgresImage = "hyperfleet/postgres:15"

	// startTimeout bounds pulling (when needed) and starting the container; a local image is ready in ~10 s.
	startTimeout = 5 * time.Minute

	// setupTimeout bounds one NewDatabase call, which may include building the template, i.e. migrating.
	setupTimeout = 2 * time.Minute

	// templateLockKey is the advisory lock that serialises template builds among test processes. Advisory locks
	// are scoped to the database they are taken in, so this cannot collide with a lock that the migrations
	// take inside the template being built.
	templateLockKey int64 = 0x6866_7470_6c6f_636b // "hftplock"
)

// Main runs the tests of a package against a PostgreSQL server and returns the exit code for os.Exit.
//
// If EnvDatabaseURL is set, the tests use that server. Otherwise Main starts the image named by
// EnvPostgresImage (default DefaultPostgresImage) with testcontainers, exports its URL as EnvDatabaseURL for
// NewDatabase, and removes the container when the tests finish. When no container can be started and no image was
// asked for, it uses the server at LocalServerURL if one answers there. It says on stderr which server the tests
// use; without any, it says how to provide one and returns 1: database tests fail rather than skip, so a green run
// always means they ran.
func Main(m *testing.M) int {
	return run(m, sources{container: startContainer, local: LocalServerURL, log: os.Stderr})
}

// sources are where run finds a server when EnvDatabaseURL names none.
type sources struct {
	// container starts a container of image and returns its URL and a function that removes it.
	container func(ctx context.Context, image string) (dsn string, stop func(), err error)
	// local is the server to fall back to when no container can be started.
	local string
	// log receives what run says about its choice.
	log io.Writer
}

// run is Main with the places it looks in as arguments.
func run(m interface{ Run() int }, src sources) int {
	if dsn := os.Getenv(EnvDatabaseURL); dsn != "" {
		fmt.Fprintf(src.log, "harness: using the server in %s, %s\n", EnvDatabaseURL, redact(dsn))
		return m.Run()
	}

	// testcontainers reads its configuration once, on first use, so these must be in place before any call.
	// Ryuk, its reaper, is an image that cannot be pulled where no registry is reachable; Main removes the
	// container itself instead. The host override is needed because our machines have a /.dockerenv, which makes
	// testcontainers believe it runs inside a container and dial the bridge gateway instead of the published
	// port on loopback.
	setenvDefault("TESTCONTAINERS_RYUK_DISABLED", "true")
	setenvDefault("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")

	image := os.Getenv(EnvPostgresImage)
	imageAsked := image != ""
	if !imageAsked {
		image = DefaultPostgresImage
	}
	// Without a reaper an interrupted run would leave the container behind, so an interrupt removes it first.
	// An interrupt during the start lets the start finish, because cancelling it can leave a container that the
	// engine goes on creating; a second interrupt ends the process at once.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	interrupted := make(chan struct{})
	go func() {
		<-signals
		signal.Stop(signals)
		fmt.Fprintln(src.log, "harness: interrupted; removing the PostgreSQL container (interrupt again to leave it)")
		close(interrupted)
	}()

	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	dsn, stop, err := src.container(ctx, image)
	cancel()
	select {
	case <-interrupted:
		if err == nil {
			stop()
		}
		return 1
	default:
	}
	if err != nil {
		if imageAsked {
			// An image named on purpose (as .ci/run does once it has seen containers work) is what the run must
			// use: quietly testing against another server would hide why it failed.
			fmt.Fprintf(src.log, howToProvideServer, fmt.Sprintf("%s=%s did not start: %v", EnvPostgresImage, image, err),
				EnvDatabaseURL, src.local)
			return 1
		}
		fmt.Fprintf(src.log, "harness: no %s container (%v); trying the local PostgreSQL at %s\n", image, err, redact(src.local))
		ctx, cancel := context.WithTimeout(context.Background(), localConnectTimeout)
		localErr := ping(ctx, src.local)
		cancel()
		if localErr != nil {
			fmt.Fprintf(src.log, howToProvideServer, fmt.Sprintf("no container, and the local server does not answer: %v", localErr),
				EnvDatabaseURL, src.local)
			return 1
		}
		// Nothing to remove afterwards, so an interrupt may end the tests the usual way.
		signal.Stop(signals)
		fmt.Fprintf(src.log, "harness: using the local PostgreSQL at %s\n", redact(src.local))
		return runOn(m, src.log, src.local)
	}
	defer stop()
	fmt.Fprintf(src.log, "harness: using a %s container, started in %s\n", image, time.Since(started).Round(100*time.Millisecond))
	go func() {
		<-interrupted
		stop()
		os.Exit(1)
	}()
	return runOn(m, src.log, dsn)
}

// runOn exports dsn as EnvDatabaseURL, where NewDatabase finds it, and runs the tests.
func runOn(m interface{ Run() int }, log io.Writer, dsn string) int {
	if err := os.Setenv(EnvDatabaseURL, dsn); err != nil {
		fmt.Fprintf(log, "harness: %v\n", err)
		return 1
	}
	return m.Run()
}

// howToProvideServer says what failed and the one thing to do about it.
const howToProvideServer = `harness: no PostgreSQL server for the tests: %s
Run a PostgreSQL on which the user may CREATE DATABASE and name it, e.g. the usual local one:
        export %s='%s'
`

func setenvDefault(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		_ = os.Setenv(key, value)
	}
}

// startContainer starts image and returns a URL to its "postgres" database and a function removing the container.
func startContainer(ctx context.Context, image string) (dsn string, stop func(), err error) {
	if err := checkDocker(ctx, image); err != nil {
		return "", nil, err
	}
	// The module's usual log-based wait expects the official image's two "ready to accept connections" lines;
	// waiting for the port works with any image, and the connect loop below covers the gap between the port
	// opening and the server accepting logins.
	ctr, err := tcpostgres.Run(ctx, image,
		testcontainers.WithWaitStrategy(wait.ForListeningPort("5432/tcp").WithStartupTimeout(2*time.Minute)))
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// The data is disposable, so there is no point in waiting for a clean shutdown.
			if err := testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(time.Second)); err != nil {
				fmt.Fprintf(os.Stderr, "harness: removing the PostgreSQL container: %v\n", err)
			}
		})
	}
	if err == nil {
		dsn, err = ctr.ConnectionString(ctx, "sslmode=disable")
	}
	if err == nil {
		err = waitForLogin(ctx, dsn)
	}
	if err != nil {
		stop()
		return "", nil, err
	}
	return dsn, stop, nil
}

// checkDocker fails fast, with a clear error, when there is no Docker engine, instead of letting testcontainers
// panic or retry; and it says when the image has to be pulled, since that may take long or, where no registry
// is reachable, end in an error.
func checkDocker(ctx context.Context, image string) (err error) {
	defer func() {
		// Some testcontainers helpers panic when they cannot find a Docker host.
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine: %v", r)
		}
	}()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		fmt.Fprintf(os.Stderr, "harness: image %s is not present locally; pulling it\n", image)
	}
	return nil
}

// ping connects to dsn and closes the connection again.
func ping(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	err = conn.Ping(ctx)
	_ = conn.Close(ctx)
	return err
}

// waitForLogin retries until the server accepts a connection.
func waitForLogin(ctx context.Context, dsn string) error {
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ping(attemptCtx, dsn)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("PostgreSQL container does not accept connections: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// NewDatabase creates an empty database with the latest schema on the server named by EnvDatabaseURL, drops it
// when the test finishes, and returns its URL. The URL always has a query string (sslmode=disable unless the
// server URL says otherwise), so callers may append parameters with "&".
//
// Each call is independent, so parallel tests and test processes may call it at will: the database is a copy
// of a template that is migrated once per schema version and shared by all callers.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	server := os.Getenv(EnvDatabaseURL)
	if server == "" {
		tb.Fatalf("harness: %s is not set; run the tests through harness.Main: "+
			"func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }", EnvDatabaseURL)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), setupTimeout)
	defer cancel()

	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Fatalf("harness: connecting to %s: %v", redact(server), err)
	}
	defer func() { _ = conn.Close(context.Background()) }()

	template, err := ensureTemplate(ctx, conn, server, hfpostgres.SchemaVersion())
	if err != nil {
		tb.Fatalf("harness: preparing the template database: %v", err)
	}
	name, err := randomName("hf_test_")
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	dsn, err := databaseURL(server, name)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(template)); err != nil {
		tb.Fatalf("harness: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		// The test's context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropDatabase(ctx, server, name); err != nil {
			tb.Errorf("harness: %v", err)
		}
	})
	return dsn
}

// ensureTemplate returns the name of the template database for schemaVersion, building it first if no one has.
func ensureTemplate(ctx context.Context, conn *pgx.Conn, server, schemaVersion string) (string, error) {
	sum := sha256.Sum256([]byte(schemaVersion))
	template := "hyperfleet_tpl_" + hex.EncodeToString(sum[:6])

	// A template only ever appears under its final name once it is complete (see the rename below), so finding
	// it needs no lock: the common case costs one query.
	if ok, err := databaseExists(ctx, conn, template); err != nil || ok {
		return template, err
	}

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("waiting for the template lock: %w", err)
	}
	defer func() {
		// Closing the connection would release the lock too, but the caller keeps using it.
		if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey); err != nil {
			fmt.Fprintf(os.Stderr, "harness: releasing the template lock: %v (it goes with the connection)\n", err)
		}
	}()
	if ok, err := databaseExists(ctx, conn, template); err != nil || ok {
		return template, err // another process built it while we waited
	}

	// A process that died mid-build leaves this behind; holding the lock, we know no one else is using it.
	building := template + "_build"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(building)+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(building)); err != nil {
		return "", err
	}
	dsn, err := databaseURL(server, building)
	if err != nil {
		return "", err
	}
	if err := migrate(ctx, dsn); err != nil {
		return "", fmt.Errorf("migrating %s: %w", building, err)
	}
	// Refusing connections keeps anyone from connecting to the template by accident, which would make every
	// CREATE DATABASE from it fail while they stay.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(building)+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(building)+" RENAME TO "+ident(template)); err != nil {
		return "", err
	}
	return template, nil
}

func migrate(ctx context.Context, dsn string) error {
	db, err := gorm.Open(gormpostgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	// The connections must be gone before the database can be renamed and used as a template.
	defer func() { _ = sqlDB.Close() }()
	return hfpostgres.Migrate(ctx, db)
}

func databaseExists(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	return ok, err
}

func dropDatabase(ctx context.Context, server, name string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// FORCE ends sessions that the test left open, e.g. a server under test that is still shutting down.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// OpenGorm opens dsn with gorm and closes it when the test finishes. SQL logging is off, since tests assert on
// errors themselves; call Debug() on the result to see the statements.
func OpenGorm(tb testing.TB, dsn string) *gorm.DB {
	tb.Helper()
	db, err := gorm.Open(gormpostgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		tb.Fatalf("harness: opening %s: %v", redact(dsn), err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	tb.Cleanup(func() { _ = sqlDB.Close() })
	return db
}

// databaseURL returns server's URL pointing at database name instead.
func databaseURL(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL, got %q", EnvDatabaseURL, redact(server))
	}
	u.Path, u.RawPath = "/"+name, ""
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func randomName(prefix string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("no randomness for a database name")
	}
	return prefix + hex.EncodeToString(b), nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// redact hides the password of a URL that goes into a test log.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
