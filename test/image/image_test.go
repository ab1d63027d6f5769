// Package image builds the HyperFleet container image the way `make image` does and checks it as a cluster would
// use it: what is in it, which user it runs as, and that the API in it migrates and serves a real PostgreSQL.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// The user the image runs as, and the one its files belong to.
const (
	nonRootUID = 65532
	rootUID    = 0
)

func TestImage(t *testing.T) {
	requireDocker(t)
	image := buildImage(t)

	t.Run("config", func(t *testing.T) {
		var cfg struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			ExposedPorts map[string]struct{}
			Env          []string
		}
		require.NoError(t, json.Unmarshal([]byte(docker(t, "image", "inspect", "-f", "{{json .Config}}", image)), &cfg))
		require.Equal(t, "65532:65532", cfg.User)
		require.Equal(t, []string{"/usr/local/bin/hyperfleet-api"}, cfg.Entrypoint)
		require.Equal(t, []string{"serve"}, cfg.Cmd)
		require.Contains(t, cfg.ExposedPorts, "8080/tcp")
		require.Contains(t, cfg.Env, "HYPERFLEET_ENV=production")
	})

	t.Run("files", func(t *testing.T) {
		files := exportFiles(t, image)
		for name, f := range files {
			require.NotContains(t, shells, path.Base(name), "%s is a shell; the image must have none", name)
			if _, ok := dockerPlaceholders[name]; ok {
				require.Zero(t, f.Size, "%s should be Docker's empty placeholder", name)
				continue
			}
			if f.Typeflag == tar.TypeReg && f.Mode&0o111 != 0 {
				require.Equal(t, "usr/local/bin", path.Dir(name), "%s is executable outside /usr/local/bin", name)
			}
		}
		var got []string
		for name, f := range files {
			if path.Dir(name) != "usr/local/bin" {
				continue
			}
			got = append(got, path.Base(name))
			require.Equal(t, byte(tar.TypeReg), f.Typeflag, name)
			require.Equal(t, rootUID, f.Uid, "%s must not be writable by the user the image runs as", name)
			require.Equal(t, int64(0o755), f.Mode&0o7777, name)
			require.True(t, f.static, "%s is dynamically linked; scratch has no libc", name)
		}
		require.ElementsMatch(t, imageBinaries(t), got, "/usr/local/bin must hold every cmd/ binary but hyperfleet-dev")

		require.Positive(t, files["etc/ssl/certs/ca-certificates.crt"].Size, "CA certificates")
		require.Contains(t, string(files["etc/passwd"].content), "nonroot:x:65532:65532:")
		require.Equal(t, int64(0o1777), files["tmp"].Mode&0o7777, "/tmp must be writable by anyone, and sticky")
		require.Equal(t, nonRootUID, files["home/nonroot"].Uid, "$HOME belongs to the user")
	})

	t.Run("API migrates and serves PostgreSQL", func(t *testing.T) {
		db := emptyDatabase(t)
		secrets := dbSecretFiles(t, db)
		// The pod of deploy/hyperfleet/api/deployment.yaml as far as docker run can say it: its restrictions, and the
		// database Secret's files where it mounts them. HYPERFLEET_ENV is development, which allows the test
		// database's sslmode=disable; the image's production refuses it.
		restricted := []string{"--network", "host", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
			"-v", secrets + ":/etc/hyperfleet/db:ro", "-e", "HYPERFLEET_ENV=development"}
		dbFlags := []string{"--db-sslmode", "disable"}
		for _, f := range []string{"host", "port", "name", "user", "password"} {
			dbFlags = append(dbFlags, "--db-"+f+"-file", "/etc/hyperfleet/db/db."+f)
		}

		run := func(how []string, command string, flags ...string) []string {
			args := append(append([]string{"run"}, how...), restricted...)
			return append(append(args, image, command), flags...)
		}

		// serve refuses a database without the schema, with the exit code that says "run migrate".
		_, err := dockerErr(run([]string{"--rm"}, "serve", dbFlags...)...)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "serve must refuse an empty database")
		require.Equal(t, 3, exit.ExitCode(), "serve's exit code for an outdated schema: %v", err)

		// migrate is the one writer of the required adapters, which serve refuses to start without.
		docker(t, run([]string{"--rm"}, "migrate", append([]string{"--required-adapters=cluster=hostedcluster-applier"}, dbFlags...)...)...)
		require.Positive(t, countMigrations(t, db), "migrate applied nothing")

		api, health, metrics := freePort(t), freePort(t), freePort(t)
		name := "hyperfleet-image-test-" + strconv.Itoa(os.Getpid())
		docker(t, run([]string{"-d", "--name", name}, "serve", append([]string{"--api-server-bindaddress", api,
			"--health-server-bindaddress", health, "--metrics-server-bindaddress", metrics}, dbFlags...)...)...)
		t.Cleanup(func() {
			if t.Failed() {
				logs, _ := exec.Command("docker", "logs", "--tail", "50", name).CombinedOutput()
				t.Logf("docker logs %s:\n%s", name, logs)
			}
			_, _ = dockerErr("rm", "-f", name)
		})
		waitReady(t, name, "http://"+health+"/readyz")

		tests := []struct {
			name   string
			url    string
			check  func(t *testing.T, body []byte)
			status int
		}{
			{name: "liveness", url: "http://" + health + "/healthz", status: http.StatusOK},
			{name: "readiness", url: "http://" + health + "/readyz", status: http.StatusOK},
			{name: "version", url: "http://" + api + "/api/hyperfleet/v1", status: http.StatusOK, check: func(t *testing.T, body []byte) {
				var got struct{ Kind, Version, Build string }
				require.NoError(t, json.Unmarshal(body, &got), "%s", body)
				require.Equal(t, struct{ Kind, Version, Build string }{"API", testVersion, testBuild}, got)
			}},
			{name: "a list from the database", url: "http://" + api + "/api/hyperfleet/v1/clusters", status: http.StatusOK,
				check: func(t *testing.T, body []byte) {
					var got struct{ Total *int }
					require.NoError(t, json.Unmarshal(body, &got), "%s", body)
					require.NotNil(t, got.Total, "%s", body)
					require.Zero(t, *got.Total)
				}},
			{name: "metrics", url: "http://" + metrics + "/metrics", status: http.StatusOK, check: func(t *testing.T, body []byte) {
				require.Contains(t, string(body), "hyperfleet_api_requests_total")
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				status, body := get(t, tt.url)
				require.Equal(t, tt.status, status, "%s", body)
				if tt.check != nil {
					tt.check(t, body)
				}
			})
		}

		t.Run("runs as 65532", func(t *testing.T) {
			pid := docker(t, "inspect", "-f", "{{.State.Pid}}", name)
			status, err := os.ReadFile("/proc/" + pid + "/status")
			require.NoError(t, err)
			for _, field := range []string{"Uid:", "Gid:"} {
				ids := statusField(t, status, field)
				require.Equal(t, []string{"65532", "65532", "65532", "65532"}, ids, "%s real, effective, saved, file system", field)
			}
		})

		t.Run("stops cleanly on SIGTERM", func(t *testing.T) {
			docker(t, "stop", "--time", "30", name)
			require.Equal(t, "0", docker(t, "inspect", "-f", "{{.State.ExitCode}}", name))
		})
	})
}

// shells are the names a shell goes by; a scratch image has none, which is what makes `kubectl exec … sh` fail.
var shells = []string{"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"}

// dockerPlaceholders are the empty files Docker puts into every container's file system (docker export lists them);
// the runtime mounts the real ones over them.
var dockerPlaceholders = map[string]struct{}{
	".dockerenv": {}, "dev/console": {}, "etc/hostname": {}, "etc/hosts": {}, "etc/resolv.conf": {}, "etc/mtab": {},
}

// file is an entry of the image's file system.
type file struct {
	*tar.Header
	content []byte // small files only
	static  bool   // an ELF executable without a program interpreter
}

// exportFiles lists the file system of a container created from image (not started), keyed by path without the
// leading slash. Docker adds a few empty files to every container (/.dockerenv, /etc/hosts, …); they are listed too.
func exportFiles(tb testing.TB, image string) map[string]file {
	tb.Helper()
	id := docker(tb, "create", image)
	defer func() { _, _ = dockerErr("rm", "-f", id) }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "export", id)
	out, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(tb, cmd.Start())
	files := map[string]file{}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(tb, err)
		f := file{Header: h}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(tb, err)
			if len(b) < 1<<20 {
				f.content = b
			}
			if exe, err := elf.NewFile(bytes.NewReader(b)); err == nil {
				f.static = true
				for _, p := range exe.Progs {
					if p.Type == elf.PT_INTERP {
						f.static = false
					}
				}
			}
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = f
	}
	require.NoError(tb, cmd.Wait(), "docker export: %s", stderr.String())
	return files
}

// imageBinaries returns the binaries the Dockerfile promises: every main package under cmd/ but hyperfleet-dev.
func imageBinaries(tb testing.TB) []string {
	tb.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", "./cmd/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	require.NoError(tb, err, "go list ./cmd/...")
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, pkg, _ := strings.Cut(line, " ")
		if name == "main" && path.Base(pkg) != "hyperfleet-dev" {
			names = append(names, path.Base(pkg))
		}
	}
	sort.Strings(names)
	require.NotEmpty(tb, names)
	return names
}

// emptyDatabase returns the URL of a fresh database from the harness with its schema taken away, so that the
// image's migrate has the whole history to apply.
func emptyDatabase(tb testing.TB) string {
	tb.Helper()
	dsn := harness.NewDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(tb, err)
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
	require.NoError(tb, err)
	return dsn
}

func countMigrations(tb testing.TB, dsn string) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(tb, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	require.NoError(tb, conn.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n))
	return n
}

// dbSecretFiles writes dsn's parts into one file each (db.host, db.port, …), as the Deployment mounts its database
// Secret, and returns the directory. The container's user must be able to read them.
func dbSecretFiles(tb testing.TB, dsn string) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	require.NoError(tb, err)
	password, _ := u.User.Password()
	dir := tb.TempDir()
	require.NoError(tb, os.Chmod(dir, 0o755))
	for name, value := range map[string]string{
		"host": u.Hostname(), "port": u.Port(), "name": strings.TrimPrefix(u.Path, "/"), "user": u.User.Username(), "password": password,
	} {
		require.NoError(tb, os.WriteFile(filepath.Join(dir, "db."+name), []byte(value+"\n"), 0o644))
	}
	return dir
}

// freePort returns a loopback address nothing listens on. The container binds it a moment later, on the host's
// network, so that neither a developer's `make run` nor a parallel test stands in the way of fixed ports.
func freePort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := l.Addr().String()
	require.NoError(tb, l.Close())
	return addr
}

// waitReady polls target until it answers 200, failing early when the container exits.
func waitReady(tb testing.TB, container, target string) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		status, _, err := tryGet(target)
		if err == nil && status == http.StatusOK {
			return
		}
		if running, _ := dockerErr("inspect", "-f", "{{.State.Running}}", container); running != "true" {
			tb.Fatalf("container %s exited before %s answered 200", container, target)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not answer 200 within a minute (last: %d, %v)", target, status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func get(tb testing.TB, target string) (int, []byte) {
	tb.Helper()
	status, body, err := tryGet(target)
	require.NoError(tb, err)
	return status, body
}

func tryGet(target string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, http.NoBody)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// statusField returns the values of a line of /proc/<pid>/status, e.g. "Uid:".
func statusField(tb testing.TB, status []byte, field string) []string {
	tb.Helper()
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strings.Fields(rest)
		}
	}
	tb.Fatalf("no %s in /proc/<pid>/status", field)
	return nil
}
