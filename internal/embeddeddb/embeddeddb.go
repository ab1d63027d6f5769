// Package embeddeddb runs a private PostgreSQL server from the machine's installed PostgreSQL binaries. It backs
// `hyperfleet-api serve --embedded-db`, the zero-setup development default of `make run`; it is not meant for
// production.
//
// Config.DataDir holds:
//
//	pgdata/        the cluster; kept between runs, so development data survives restarts
//	run/           the server's Unix socket and its lock file; recreated on every start
//	postgres.log   initdb and server output of the latest start
//
// Nothing is downloaded: the server comes from Config.BinariesPath (by default the newest /usr/lib/postgresql/<v>).
// initdb and postgres refuse to run as root, so when the caller is root both run as the `postgres` system user and
// Config.DataDir is owned by that user.
//
// github.com/fergusstrange/embedded-postgres is deliberately not used: it runs initdb and pg_ctl as the calling user,
// so it cannot work as root, and everything else it would do for a non-root caller (initdb, start, wait, create the
// database, stop) is what the root path has to do anyway. One path keeps the two cases from drifting apart. It would
// also re-run initdb over an existing cluster (losing the data) whenever the installed major version changes.
package embeddeddb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	defaultPort     = 5433
	defaultDatabase = "hyperfleet"
	// defaultBinariesRoot is where Debian and Ubuntu install one directory per PostgreSQL major version.
	defaultBinariesRoot = "/usr/lib/postgresql"
	// rootDataDir is the default DataDir for root: root's own cache dir (/root/.cache) is mode 0700, which the
	// postgres user cannot traverse.
	rootDataDir = "/var/cache/hyperfleet/embedded-postgres"
	// serverUser is the OS user the server runs as when the caller is root; Debian's postgresql package creates it.
	serverUser = "postgres"
	// superuser is the database superuser initdb creates; the DSN connects as it.
	superuser = "postgres"

	startTimeout = 60 * time.Second
	// stopTimeout bounds the fast shutdown; it is generous because the shutdown checkpoint flushes dirty buffers.
	stopTimeout    = 60 * time.Second
	killTimeout    = 10 * time.Second
	logTailLines   = 40
	maxSocketPath  = 107 // sun_path is 108 bytes on Linux, NUL included
	pgdataDirName  = "pgdata"
	runDirName     = "run"
	logFileName    = "postgres.log"
	initdbTempName = "pgdata.initdb"
)

// Config says where the private server lives. The zero value is usable: every field has a default.
type Config struct {
	// DataDir holds the cluster, the socket and the log. Default: <os.UserCacheDir()>/hyperfleet/embedded-postgres,
	// or /var/cache/hyperfleet/embedded-postgres when running as root. As root, every parent directory of DataDir
	// must be traversable by the postgres user.
	DataDir string
	// Port is the TCP port on 127.0.0.1. Default 5433, because the machine's own PostgreSQL uses 5432.
	Port uint32
	// Database is created on start if it does not exist. Default "hyperfleet".
	Database string
	// BinariesPath is a PostgreSQL installation prefix containing bin/postgres and bin/initdb. Default: the newest
	// /usr/lib/postgresql/<version> that has bin/postgres.
	BinariesPath string
	// Logger receives progress messages. Default slog.Default().
	Logger *slog.Logger
}

// Server is a running private PostgreSQL started by Start. Its methods are safe for concurrent use.
type Server struct {
	cmd     *exec.Cmd
	dsn     string
	logPath string
	log     *slog.Logger

	// exited is closed once the postgres process has been reaped; waitErr is its exit error, written before that.
	exited  chan struct{}
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// Start starts a private PostgreSQL in cfg.DataDir, running initdb first if the directory holds no cluster yet, and
// returns once the server accepts connections and cfg.Database exists. An existing cluster is reused as is; a
// postmaster.pid left by a killed run is removed, but a server still running on the same DataDir is an error (Start
// never stops a server it did not start). ctx bounds startup only: cancelling it later does not stop the server.
// On success the caller must call Stop; on error nothing is left running.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	begin := time.Now()
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger

	if err := checkBinaries(cfg.BinariesPath); err != nil {
		return nil, err
	}
	major, err := binariesMajorVersion(ctx, cfg.BinariesPath)
	if err != nil {
		return nil, err
	}

	// As root, the server and initdb run as the postgres user; cred stays nil otherwise.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = serverCredential(); err != nil {
			return nil, err
		}
	}

	dataDir, err := prepareDataDir(cfg.DataDir, cred)
	if err != nil {
		return nil, err
	}
	pgdata := filepath.Join(dataDir, pgdataDirName)
	runDir := filepath.Join(dataDir, runDirName)
	logPath := filepath.Join(dataDir, logFileName)
	port := strconv.FormatUint(uint64(cfg.Port), 10)

	if socket := filepath.Join(runDir, ".s.PGSQL."+port); len(socket) > maxSocketPath {
		return nil, fmt.Errorf("embeddeddb: socket path %s is longer than %d bytes; choose a shorter DataDir", socket, maxSocketPath)
	}

	logger.Info("starting embedded postgres", "data_dir", dataDir, "port", cfg.Port, "binaries", cfg.BinariesPath,
		"version", major, "run_as", runAsName(cred))

	initialized, err := clusterExists(pgdata, major)
	if err != nil {
		return nil, err
	}
	noServer := true
	if initialized {
		if noServer, err = clearStalePID(pgdata, logger); err != nil {
			return nil, err
		}
	}
	if err := checkPortFree(cfg.Port); err != nil {
		return nil, err
	}

	// The run dir only ever holds the socket and its lock; recreating it drops a stale lock whose pid may have been
	// reused by an unrelated process, which would make postgres refuse to start. It is kept when a server might still
	// be using it, so as not to pull the socket from under that server.
	if noServer {
		if err := os.RemoveAll(runDir); err != nil {
			return nil, fmt.Errorf("embeddeddb: clearing %s: %w", runDir, err)
		}
	}
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, fmt.Errorf("embeddeddb: creating %s: %w", runDir, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embeddeddb: opening server log: %w", err)
	}
	// The children write through their own copies of the descriptor; ours is not needed once they are started.
	defer func() { _ = logFile.Close() }()
	if cred != nil {
		if err := chownTree(dataDir, cred); err != nil {
			return nil, err
		}
	}

	if !initialized {
		if err := initCluster(ctx, cfg.BinariesPath, dataDir, logFile, cred, logger); err != nil {
			return nil, err
		}
	}

	// A postmaster killed moments ago leaves children that hold its shared memory for a little while longer, and
	// postgres refuses to start until they are gone: that one failure is waited out, briefly.
	var s *Server
	for attempt := 1; ; attempt++ {
		if s, err = launch(ctx, cfg, dataDir, pgdata, port, runDir, logPath, logFile, cred, logger); err == nil {
			break
		}
		if attempt >= sharedMemoryRetries || !strings.Contains(logTail(logPath), "pre-existing shared memory block") {
			return nil, err
		}
		logger.Info("waiting for the processes of a killed server to release its shared memory", "attempt", attempt)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("embeddeddb: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		if err := logFile.Truncate(0); err != nil {
			return nil, fmt.Errorf("embeddeddb: truncating server log: %w", err)
		}
	}
	logger.Info("embedded postgres ready", "elapsed_ms", time.Since(begin).Milliseconds(), "dsn", s.dsn)
	return s, nil
}

// DSN returns a postgres:// URL for the configured database over TCP on 127.0.0.1 with sslmode=disable. It needs no
// password: the cluster uses trust authentication and listens on loopback only.
func (s *Server) DSN() string { return s.dsn }

// Stop shuts the server down with PostgreSQL's fast shutdown (clients are disconnected, a checkpoint is written, so
// the next start needs no recovery) and waits for the process to exit, escalating to an immediate shutdown and then
// SIGKILL if it takes too long. Calling Stop more than once returns the first call's result. A server that already
// exited on its own is reported as an error unless it exited cleanly.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.shutdown() })
	return s.stopErr
}

func (s *Server) shutdown() error {
	select {
	case <-s.exited:
		// A clean exit here is a fast shutdown triggered from outside, e.g. Ctrl-C reaching the whole process group.
		if s.waitErr != nil {
			return fmt.Errorf("embeddeddb: postgres exited before Stop: %w%s", s.waitErr, logTail(s.logPath))
		}
		return nil
	default:
	}
	s.log.Info("stopping embedded postgres")
	begin := time.Now()
	// SIGINT is PostgreSQL's "fast" shutdown mode, the same as pg_ctl stop -m fast.
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("embeddeddb: signalling postgres: %w", err)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		// SIGQUIT is the "immediate" mode: no checkpoint, so the next start runs crash recovery, but no data is lost.
		// A signal to a process that has just exited fails harmlessly; s.exited tells when it is gone either way.
		if err := s.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			s.log.Warn("embedded postgres: immediate shutdown signal failed", "error", err)
		}
		select {
		case <-s.exited:
		case <-time.After(killTimeout):
			if err := s.cmd.Process.Kill(); err != nil {
				s.log.Warn("embedded postgres: kill failed", "error", err)
			}
			<-s.exited
		}
		return fmt.Errorf("embeddeddb: postgres did not finish a fast shutdown within %s and was stopped forcibly%s",
			stopTimeout, logTail(s.logPath))
	}
	if s.waitErr != nil {
		return fmt.Errorf("embeddeddb: postgres shutdown: %w%s", s.waitErr, logTail(s.logPath))
	}
	s.log.Info("embedded postgres stopped", "elapsed_ms", time.Since(begin).Milliseconds())
	return nil
}

// awaitReady connects over the private Unix socket rather than TCP so that a connection proves our server is up,
// not some other server that happens to listen on the port. It then creates the database if it is missing.
func (s *Server) awaitReady(ctx context.Context, runDir, port, database string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	connCfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=postgres sslmode=disable connect_timeout=5",
		quoteConnValue(runDir), port, superuser))
	if err != nil {
		return fmt.Errorf("building readiness connection config: %w", err)
	}
	delay := 20 * time.Millisecond
	for {
		conn, err := pgx.ConnectConfig(ctx, connCfg)
		if err == nil {
			err = ensureDatabase(ctx, conn, database, s.log)
			if closeErr := conn.Close(context.WithoutCancel(ctx)); err == nil && closeErr != nil {
				s.log.Debug("closing the readiness connection", "error", closeErr)
			}
			return err
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited during startup: %w", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections: %w (last attempt: %w)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

func ensureDatabase(ctx context.Context, conn *pgx.Conn, database string, logger *slog.Logger) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", database).Scan(&exists); err != nil {
		return fmt.Errorf("checking for database %q: %w", database, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %q: %w", database, err)
	}
	logger.Info("created database", "database", database)
	return nil
}

func withDefaults(cfg Config) (Config, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Port == 0 {
		cfg.Port = defaultPort
	}
	if cfg.Port > 65535 {
		return cfg, fmt.Errorf("embeddeddb: port %d out of range", cfg.Port)
	}
	if cfg.Database == "" {
		cfg.Database = defaultDatabase
	}
	if cfg.DataDir == "" {
		if os.Geteuid() == 0 {
			cfg.DataDir = rootDataDir
		} else {
			cache, err := os.UserCacheDir()
			if err != nil {
				return cfg, fmt.Errorf("embeddeddb: no default data dir, set Config.DataDir: %w", err)
			}
			cfg.DataDir = filepath.Join(cache, "hyperfleet", "embedded-postgres")
		}
	}
	if cfg.BinariesPath == "" {
		path, err := newestBinaries(defaultBinariesRoot)
		if err != nil {
			return cfg, err
		}
		cfg.BinariesPath = path
	}
	return cfg, nil
}

// newestBinaries picks the highest version directory under root that contains a server binary; directories left
// behind by a removed server package (client tools only) are skipped.
func newestBinaries(root string) (string, error) {
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("embeddeddb: looking for PostgreSQL binaries in %s: %w", root, err)
	}
	var best string
	var bestVersion []int
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		if !ok || !isFile(filepath.Join(root, e.Name(), "bin", "postgres")) {
			continue
		}
		if bestVersion == nil || compareVersions(v, bestVersion) > 0 {
			best, bestVersion = filepath.Join(root, e.Name()), v
		}
	}
	if best == "" {
		return "", fmt.Errorf("embeddeddb: no PostgreSQL server found in %s/<version>/bin/postgres; "+
			"install PostgreSQL (apt-get install postgresql) or set Config.BinariesPath", root)
	}
	return best, nil
}

func parseVersion(s string) ([]int, bool) {
	var v []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

func compareVersions(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] - b[i]
		}
	}
	return len(a) - len(b)
}

func checkBinaries(prefix string) error {
	for _, name := range []string{"postgres", "initdb"} {
		if p := filepath.Join(prefix, "bin", name); !isFile(p) {
			return fmt.Errorf("embeddeddb: %s not found; install PostgreSQL (apt-get install postgresql) or fix Config.BinariesPath", p)
		}
	}
	return nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// binariesMajorVersion returns the major version in the form PG_VERSION files use ("15", or "9.6" before 10).
func binariesMajorVersion(ctx context.Context, prefix string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(prefix, "bin", "postgres"), "--version").Output() //nolint:gosec // the configured PostgreSQL binaries, not user input
	if err != nil {
		return "", fmt.Errorf("embeddeddb: running postgres --version: %w", err)
	}
	// "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)"
	_, after, ok := strings.Cut(string(out), "(PostgreSQL) ")
	if !ok {
		return "", fmt.Errorf("embeddeddb: unexpected postgres --version output %q", out)
	}
	parts := strings.SplitN(strings.Fields(after)[0], ".", 3)
	major := strings.TrimRightFunc(parts[0], func(r rune) bool { return r < '0' || r > '9' }) // "16beta1"
	if n, err := strconv.Atoi(major); err == nil && n < 10 && len(parts) > 1 {
		major += "." + parts[1]
	}
	return major, nil
}

// clusterExists reports whether pgdata holds a cluster of the binaries' major version. A cluster of another major
// version is an error rather than a reason to re-initialize, because that would throw away the developer's data.
func clusterExists(pgdata, major string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(pgdata, "PG_VERSION"))
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		if _, statErr := os.Stat(pgdata); statErr == nil {
			return false, fmt.Errorf("embeddeddb: %s exists but holds no PostgreSQL cluster (no PG_VERSION); remove it", pgdata)
		}
		return false, nil
	default:
		return false, fmt.Errorf("embeddeddb: reading cluster version: %w", err)
	}
	if have := strings.TrimSpace(string(b)); have != major {
		return false, fmt.Errorf("embeddeddb: %s was created by PostgreSQL %s but the binaries are version %s; "+
			"set Config.BinariesPath to a PostgreSQL %s installation, or remove %s (its data is lost)", pgdata, have, major, have, pgdata)
	}
	return true, nil
}

// initCluster runs initdb into a scratch directory and renames it into place, so an interrupted first run never
// leaves a half-initialized pgdata that later starts would mistake for a cluster.
func initCluster(ctx context.Context, binaries, dataDir string, logFile *os.File, cred *syscall.Credential, logger *slog.Logger) error {
	begin := time.Now()
	tmp := filepath.Join(dataDir, initdbTempName)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("embeddeddb: clearing %s: %w", tmp, err)
	}
	logger.Info("initializing embedded postgres data directory (first run)", "pgdata", filepath.Join(dataDir, pgdataDirName))
	cmd := exec.CommandContext(ctx, filepath.Join(binaries, "bin", "initdb"), //nolint:gosec // the configured PostgreSQL binaries, not user input
		"-D", tmp,
		"--auth=trust",
		"-U", superuser,
		"-E", "UTF8",
		// Fixed rather than inherited from the environment, where LANG often names a locale that is not installed;
		// C.UTF-8 is what the machine's own cluster uses.
		"--locale=C.UTF-8",
	)
	cmd.Dir = dataDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("embeddeddb: initdb: %w%s", err, logTail(logFile.Name()))
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, pgdataDirName)); err != nil {
		return fmt.Errorf("embeddeddb: moving initialized cluster into place: %w", err)
	}
	logger.Info("initialized embedded postgres data directory", "elapsed_ms", time.Since(begin).Milliseconds())
	return nil
}

// sharedMemoryRetries bounds how long Start waits out a killed server's lingering processes (× 250 ms).
const sharedMemoryRetries = 20

// launch starts the postgres process and waits until it accepts connections; on failure the error carries the
// tail of the server log and nothing is left running.
func launch(ctx context.Context, cfg Config, dataDir, pgdata, port, runDir, logPath string, logFile *os.File,
	cred *syscall.Credential, logger *slog.Logger) (*Server, error) {
	s := &Server{
		dsn:     buildDSN(cfg.Port, cfg.Database),
		logPath: logPath,
		log:     logger,
		exited:  make(chan struct{}),
	}
	// Not CommandContext: the server outlives the context it was started under, and is stopped by Stop.
	s.cmd = exec.Command(filepath.Join(cfg.BinariesPath, "bin", "postgres"), //nolint:gosec,noctx // configured binaries; see above
		"-D", pgdata,
		"-p", port,
		"-k", runDir,
		"-c", "listen_addresses=127.0.0.1",
	)
	s.cmd.Dir = dataDir // the inherited cwd may not be accessible to the postgres user
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("embeddeddb: starting postgres: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()

	if err := s.awaitReady(ctx, runDir, port, cfg.Database); err != nil {
		select {
		case <-s.exited: // nothing left to stop, and err already says how it ended
		default:
			if stopErr := s.Stop(); stopErr != nil {
				logger.Warn("stopping embedded postgres after failed start", "error", stopErr)
			}
		}
		return nil, fmt.Errorf("embeddeddb: %w%s", err, logTail(logPath))
	}
	return s, nil
}
