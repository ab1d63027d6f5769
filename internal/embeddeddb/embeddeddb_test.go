package embeddeddb

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestStartStopReuse runs the server several times on one data dir: the first run initializes it, later runs must
// reuse it (a table created in the first run is still there) and recover from the leftovers of killed runs.
func TestStartStopReuse(t *testing.T) {
	dir := dataDir(t)
	pgdata := func() string { // resolved like Start resolves it, so it matches what postmaster.pid records
		p, err := filepath.EvalSymlinks(filepath.Join(dir, pgdataDirName))
		require.NoError(t, err)
		return p
	}

	runs := []struct {
		name     string
		prepare  func(t *testing.T) // simulates what a previous run left behind
		wantInit bool
		wantErr  []string
	}{
		{name: "first run initializes", wantInit: true},
		{name: "second run reuses the cluster"},
		{
			name: "previous server was SIGKILLed",
			prepare: func(t *testing.T) {
				s, err := Start(context.Background(), Config{DataDir: dir, Port: freePort(t), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
				require.NoError(t, err)
				require.NoError(t, s.cmd.Process.Kill())
				<-s.exited
				require.FileExists(t, filepath.Join(pgdata(), "postmaster.pid"))
			},
		},
		{
			name: "stale postmaster.pid of a dead process",
			prepare: func(t *testing.T) {
				writePIDFile(t, pgdata(), 99999999) // above any pid_max, so never alive
			},
		},
		{
			name: "stale postmaster.pid whose pid now belongs to another process",
			prepare: func(t *testing.T) {
				writePIDFile(t, pgdata(), 1) // init is alive but is not a postmaster of this data dir
			},
		},
		{
			name: "server that fails to start reports its log",
			prepare: func(t *testing.T) {
				f, err := os.OpenFile(filepath.Join(pgdata(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteString("shared_buffers = 'lots'\n")
				require.NoError(t, err)
				require.NoError(t, f.Close())
			},
			wantErr: []string{"postgres exited during startup", "last lines of", `invalid value for parameter "shared_buffers"`},
		},
	}
	for i, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			if run.prepare != nil {
				run.prepare(t)
			}
			var logs logbuf.Buffer
			cfg := Config{
				DataDir:  dir,
				Port:     freePort(t),
				Database: "hyperfleet_test",
				Logger:   slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil)),
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			begin := time.Now()
			s, err := Start(ctx, cfg)
			if run.wantErr != nil {
				for _, want := range run.wantErr {
					require.ErrorContains(t, err, want)
				}
				t.Logf("Start failed as expected after %s: %v", time.Since(begin), err)
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Stop() }) // only matters if an assertion below fails first
			t.Logf("Start took %s", time.Since(begin))
			require.Equal(t, run.wantInit, strings.Contains(logs.String(), "first run"), "initdb ran iff first run")
			require.Contains(t, s.DSN(), "sslmode=disable")
			require.Contains(t, s.DSN(), "127.0.0.1:"+strconv.Itoa(int(cfg.Port)))

			conn, err := pgx.Connect(ctx, s.DSN())
			require.NoError(t, err)
			var one int
			require.NoError(t, conn.QueryRow(ctx, "select 1").Scan(&one))
			require.Equal(t, 1, one)
			var db string
			require.NoError(t, conn.QueryRow(ctx, "select current_database()").Scan(&db))
			require.Equal(t, cfg.Database, db)
			_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS runs (n int)")
			require.NoError(t, err)
			_, err = conn.Exec(ctx, "INSERT INTO runs VALUES ($1)", i)
			require.NoError(t, err)
			var count int
			require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM runs").Scan(&count))
			require.Equal(t, i+1, count, "rows of earlier runs survive restarts")
			require.NoError(t, conn.Close(ctx))

			if i == 1 {
				// A second server on the same data dir must be refused with a clear message, not started next to it.
				_, err := Start(ctx, Config{DataDir: dir, Port: freePort(t), Logger: cfg.Logger})
				require.ErrorContains(t, err, "already running")
				t.Logf("second server refused: %v", err)
			}

			begin = time.Now()
			require.NoError(t, s.Stop())
			t.Logf("Stop took %s", time.Since(begin))
			require.NoError(t, s.Stop(), "Stop is idempotent")
			require.NoFileExists(t, filepath.Join(dir, pgdataDirName, "postmaster.pid"), "clean shutdown removes the pid file")
		})
	}
}

// TestStartErrors covers failures detected before or instead of a server start; none of them may destroy data.
func TestStartErrors(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, cfg *Config)
		wantErr  string
		keeps    string // a file under DataDir that must survive the failed start
		rootOnly bool
	}{
		{
			name: "cluster of another major version is kept, not re-initialized",
			setup: func(t *testing.T, cfg *Config) {
				writeFile(t, filepath.Join(cfg.DataDir, pgdataDirName, "PG_VERSION"), "9.6\n")
			},
			wantErr: "was created by PostgreSQL 9.6",
			keeps:   filepath.Join(pgdataDirName, "PG_VERSION"),
		},
		{
			name: "pgdata without a cluster",
			setup: func(t *testing.T, cfg *Config) {
				writeFile(t, filepath.Join(cfg.DataDir, pgdataDirName, "notes.txt"), "mine")
			},
			wantErr: "holds no PostgreSQL cluster",
			keeps:   filepath.Join(pgdataDirName, "notes.txt"),
		},
		{
			name:    "binaries path without a server",
			setup:   func(t *testing.T, cfg *Config) { cfg.BinariesPath = t.TempDir() },
			wantErr: "apt-get install postgresql",
		},
		{
			name: "port in use",
			setup: func(t *testing.T, cfg *Config) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				cfg.Port = uint32(l.Addr().(*net.TCPAddr).Port)
			},
			wantErr: "is not available",
		},
		{
			name:    "socket path too long",
			setup:   func(t *testing.T, cfg *Config) { cfg.DataDir = filepath.Join(cfg.DataDir, strings.Repeat("d", 100)) },
			wantErr: "socket path",
		},
		{
			name: "data dir the postgres user cannot reach",
			setup: func(t *testing.T, cfg *Config) {
				private := filepath.Join(cfg.DataDir, "private")
				require.NoError(t, os.Mkdir(private, 0o700))
				cfg.DataDir = filepath.Join(private, "pg")
			},
			wantErr:  "cannot traverse",
			rootOnly: true,
		},
	}
	for _, tt := range tests {
		if tt.rootOnly && os.Geteuid() != 0 {
			// Only root hands the data dir to another user; the case does not exist for anyone else.
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{DataDir: dataDir(t), Port: freePort(t), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
			tt.setup(t, &cfg)
			_, err := Start(context.Background(), cfg)
			require.ErrorContains(t, err, tt.wantErr)
			if tt.keeps != "" {
				require.FileExists(t, filepath.Join(cfg.DataDir, tt.keeps))
			}
		})
	}
}

func TestNewestBinaries(t *testing.T) {
	tests := []struct {
		name    string
		dirs    map[string]bool // version dir -> has bin/postgres
		want    string
		wantErr bool
	}{
		{name: "numeric not lexical order", dirs: map[string]bool{"9.6": true, "10": true, "15": true}, want: "15"},
		{name: "client-only dir skipped", dirs: map[string]bool{"15": true, "16": false}, want: "15"},
		{name: "non-version dir skipped", dirs: map[string]bool{"14": true, "common": true}, want: "14"},
		{name: "none", dirs: map[string]bool{"16": false}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for dir, hasServer := range tt.dirs {
				require.NoError(t, os.MkdirAll(filepath.Join(root, dir, "bin"), 0o755))
				if hasServer {
					writeFile(t, filepath.Join(root, dir, "bin", "postgres"), "")
				}
			}
			got, err := newestBinaries(root)
			if tt.wantErr {
				require.ErrorContains(t, err, "apt-get install postgresql")
				return
			}
			require.NoError(t, err)
			require.Equal(t, filepath.Join(root, tt.want), got)
		})
	}
}

// TestAsUnprivilegedUser reruns TestStartStopReuse as the postgres user, so that the non-root path — the one
// developers' own machines take — is exercised on machines where tests run as root.
func TestAsUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		// Already unprivileged: the non-root path is this very process.
		TestStartStopReuse(t)
		return
	}
	cred, err := serverCredential()
	require.NoError(t, err)
	dir := dataDir(t)
	// The test binary sits in go's private 0700 work dir, out of the postgres user's reach.
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "embeddeddb.test")
	copyFile(t, self, bin)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	require.NoError(t, os.Chown(home, int(cred.Uid), int(cred.Gid)))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestStartStopReuse$", "-test.count=1", "-test.v")
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "TMPDIR="+home, "XDG_CACHE_HOME=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), `run_as="current user"`)
	require.Contains(t, string(out), "--- PASS: TestStartStopReuse")
}

// dataDir returns a fresh directory for Config.DataDir. As root, the server runs as the postgres user, which must be
// able to traverse t.TempDir's 0700 parent; cleanup still works because root removes files of any owner.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	}
	return dir
}

func freePort(t *testing.T) uint32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return uint32(l.Addr().(*net.TCPAddr).Port)
}

func writePIDFile(t *testing.T, pgdata string, pid int) {
	t.Helper()
	// The layout of a real postmaster.pid: pid, data dir, start time, port, socket dir, listen address, ...
	writeFile(t, filepath.Join(pgdata, "postmaster.pid"), strconv.Itoa(pid)+"\n"+pgdata+"\n1700000000\n5433\n/tmp\n127.0.0.1\n")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}

// testWriter routes log output to t.Log, so it shows with -v and next to a failure.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
