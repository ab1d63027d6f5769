package embeddeddb

// Running as the server user, preparing and owning the data directory, and recovering from a killed run.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func serverCredential() (*syscall.Credential, error) {
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("embeddeddb: running as root needs the %q system user to run PostgreSQL as "+
			"(apt-get install postgresql creates it): %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("embeddeddb: uid of %s: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("embeddeddb: gid of %s: %w", serverUser, err)
	}
	// An empty Groups drops root's supplementary groups instead of keeping them.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func runAsName(cred *syscall.Credential) string {
	if cred == nil {
		return "current user"
	}
	return serverUser
}

// prepareDataDir creates dir and returns its absolute, symlink-free path, which is also what postmaster.pid records
// and what clearStalePID compares against. As root it hands dir to the server user and checks that the user can reach
// it, since initdb's "permission denied" would not say which parent directory is at fault.
func prepareDataDir(dir string, cred *syscall.Credential) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("embeddeddb: data dir: %w", err)
	}
	// Parents get 0755 so that, as root, the server user can traverse the ones created here.
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil { //nolint:gosec // traversable by the server user, see above
		return "", fmt.Errorf("embeddeddb: creating data dir parent: %w", err)
	}
	if err := os.Mkdir(abs, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("embeddeddb: creating data dir: %w", err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", fmt.Errorf("embeddeddb: resolving data dir: %w", err)
	}
	if cred != nil {
		if err := os.Lchown(abs, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", fmt.Errorf("embeddeddb: handing data dir to %s: %w", serverUser, err)
		}
		if err := checkTraversable(abs, cred); err != nil {
			return "", err
		}
	}
	return abs, nil
}

// checkTraversable checks the search permission of every parent of dir for cred from the mode bits; cred carries no
// supplementary groups, so owner, primary group and other are the only classes that apply.
func checkTraversable(dir string, cred *syscall.Credential) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("embeddeddb: checking data dir parents: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := fi.Mode().Perm()
		var canSearch bool
		switch {
		case st.Uid == cred.Uid:
			canSearch = perm&0o100 != 0
		case st.Gid == cred.Gid:
			canSearch = perm&0o010 != 0
		default:
			canSearch = perm&0o001 != 0
		}
		if !canSearch {
			return fmt.Errorf("embeddeddb: the %s user, which runs the server when started as root, cannot traverse %s "+
				"(mode %s) to reach %s; choose a DataDir outside it (the default for root is %s)", serverUser, p, perm, dir, rootDataDir)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// chownTree gives everything under dir to the server user, including files root created there (the log, the run dir,
// or anything a developer copied in as root).
func chownTree(dir string, cred *syscall.Credential) error {
	// The tree is the embedded server's own data dir, created by us and written only by root and that user, so a
	// symlink swapped in between the walk and the chown is not a threat here.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == cred.Uid && st.Gid == cred.Gid {
			return nil
		}
		return os.Lchown(path, int(cred.Uid), int(cred.Gid)) //nolint:gosec // see above
	})
	if err != nil {
		return fmt.Errorf("embeddeddb: handing %s to %s: %w", dir, serverUser, err)
	}
	return nil
}

// clearStalePID removes a postmaster.pid whose process is gone or is no longer a postmaster of pgdata (its pid reused
// after a kill or reboot), because postgres refuses to start while the pid in the file is alive. It reports whether
// no server can be running on pgdata; when it cannot tell, it leaves the file to postgres's own lock-file check.
func clearStalePID(pgdata string, logger *slog.Logger) (noServer bool, err error) {
	path := filepath.Join(pgdata, "postmaster.pid")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("embeddeddb: reading %s: %w", path, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err == nil && pid > 0 {
		switch postmasterState(pid, pgdata) {
		case pidRunning:
			return false, fmt.Errorf("embeddeddb: a PostgreSQL server (pid %d) is already running on %s, either another "+
				"instance's or one left over from a run that was killed; stop it with `kill -INT %d`, or use another "+
				"data dir", pid, pgdata, pid)
		case pidUnknown:
			return false, nil
		case pidStale: // removed below
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("embeddeddb: removing stale %s: %w", path, err)
	}
	logger.Warn("removed stale postmaster.pid left by a previous run", "pid", pid)
	return true, nil
}

type pidState int

const (
	pidStale pidState = iota
	pidRunning
	pidUnknown
)

func postmasterState(pid int, pgdata string) pidState {
	switch err := syscall.Kill(pid, 0); {
	case errors.Is(err, syscall.ESRCH):
		return pidStale
	case err != nil && !errors.Is(err, syscall.EPERM):
		return pidUnknown
	}
	// The postmaster's command line is never rewritten, and both our own start and pg_ctl's pass -D <pgdata>.
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return pidUnknown
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == pgdata {
			return pidRunning
		}
	}
	return pidStale
}

func checkPortFree(port uint32) error {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10)))
	if err != nil {
		return fmt.Errorf("embeddeddb: port %d on 127.0.0.1 is not available; set another port: %w", port, err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("embeddeddb: releasing port probe: %w", err)
	}
	return nil
}

func buildDSN(port uint32, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// quoteConnValue quotes a keyword/value connection string value, so a data dir with spaces or quotes still works.
func quoteConnValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// logTail returns the last lines of the server log, formatted to be appended to an error; errors that stop at
// "exit status 1" would send developers hunting for a log file.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	const maxBytes = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	text := strings.Join(lines, "\n")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	return fmt.Sprintf("\n--- last lines of %s ---\n%s", path, text)
}
