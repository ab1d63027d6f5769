// Package e2e runs the whole system as a developer does with `make run`: `hyperfleet-dev up` supervising the real
// binaries as processes (PostgreSQL from the test harness, hyperfleet-api, two management clusters with a
// kube-apiserver and a hypershift-sim each, the other simulators, the four adapters), driven through the
// `hyperfleet` CLI, with components killed with SIGKILL mid-flow.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// envKeepLogs names a directory into which the run's logs (up's output and every component's log) are copied
// when the test ends; the dev dir itself goes with the test.
const envKeepLogs = "HYPERFLEET_E2E_LOGS"

// binaries are the commands the system is made of, built from this module.
func binaries() []string {
	return []string{"hyperfleet-dev", "hyperfleet-api", "hyperfleet", "cincinnati-sim", "hivelocity-sim", "hypershift-sim",
		"version-resolver", "hostedcluster-applier", "hivelocity-provisioner", "cluster-placer"}
}

// addrs are the listeners of one system, all on loopback ports free when it starts: kube, etcd and hypershift are
// management cluster mc-a's, the kubeB… ones mc-b's.
type addrs struct {
	api, health, metrics, kube, etcd, cincinnati, hivelocity, hypershift, resolver, applier, provisioner string
	kubeB, etcdB, hypershiftB, placer                                                                    string
}

// system is a running `hyperfleet-dev up`.
type system struct {
	bin     string
	devDir  string
	home    string // the CLI's configuration
	addrs   addrs
	cmd     *exec.Cmd
	output  *bytes.Buffer // what up printed (its process is gone when this is read)
	outFile string
	exited  chan struct{}
	waitErr error
	started time.Time
	ready   time.Duration // from the start of up until every component was ready
}

// startSystem builds the binaries and runs `hyperfleet-dev up` on a fresh database and dev dir until the test ends.
func startSystem(t *testing.T) *system {
	t.Helper()
	assets, source := kubeenv.AssetsDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(assets, name)); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Fatalf("e2e: no executable %s in %s (%s): build etcd and kube-apiserver once with `make k8s-assets` "+
				"(6-25 min cold), or point %s at them", name, assets, source, kubeenv.EnvAssets)
		}
	}
	s := &system{bin: t.TempDir(), devDir: t.TempDir(), home: t.TempDir(), exited: make(chan struct{})}
	built := time.Now()
	for _, name := range binaries() {
		require.NoError(t, os.Symlink(harness.Build(t, "./cmd/"+name), filepath.Join(s.bin, name)))
	}
	t.Logf("built %d binaries in %s", len(binaries()), time.Since(built).Round(100*time.Millisecond))
	s.addrs = freeAddrs(t)
	dsn := harness.NewDatabase(t)

	a := s.addrs
	args := []string{"up", "--dev-dir", s.devDir, "--bin-dir", s.bin, "--issuer-dir", filepath.Join(s.devDir, "issuer"),
		"--db-url", dsn, "--kube-assets", assets, "--color", "never",
		"--api-address", a.api, "--health-address", a.health, "--metrics-address", a.metrics,
		"--kube-address", a.kube, "--etcd-address", a.etcd, "--cincinnati-address", a.cincinnati,
		"--hivelocity-address", a.hivelocity, "--hypershift-health-address", a.hypershift,
		"--version-resolver-ops-address", a.resolver, "--hostedcluster-applier-ops-address", a.applier,
		"--hivelocity-provisioner-ops-address", a.provisioner, "--cluster-placer-ops-address", a.placer,
		"--mc-b-kube-address", a.kubeB, "--mc-b-etcd-address", a.etcdB, "--mc-b-hypershift-health-address", a.hypershiftB,
		// Room for every cluster the test has at once (the kills keep six), on both management clusters.
		"--max-hosted-clusters", "mc-a=10,mc-b=10", "--placement-retry", "500ms",
		// Fast enough to keep the suite within minutes on two shared cores: a 10-minute reload takes 5 s, a
		// HyperShift rollout 3 s (long enough to kill the applier in the middle of one).
		"--time-scale", "120", "--hypershift-delay", "3s", "--poll-interval", "500ms", "--stream-recheck", "2s",
		"--claim-settle", "500ms", "--stop-timeout", "15s",
		"--arg", "version-resolver=--graph-cache-ttl=0s",
		"--arg", "hostedcluster-applier=--progress-interval=1s",
		"--arg", "hivelocity-provisioner=--provisioning-poll-interval=500ms",
		"--arg", "hivelocity-provisioner=--device-list-ttl=500ms",
		"--arg", "hivelocity-provisioner=--status-interval=1s",
	}
	s.outFile = filepath.Join(t.TempDir(), "up.log")
	out, err := os.Create(s.outFile)
	require.NoError(t, err)
	s.output = &bytes.Buffer{}
	s.cmd = exec.Command(filepath.Join(s.bin, "hyperfleet-dev"), args...) //nolint:gosec,noctx // the binary just built; stopped by signal
	s.cmd.Stdout, s.cmd.Stderr = io.MultiWriter(out, s.output), io.MultiWriter(out, s.output)
	s.cmd.Env = append(os.Environ(), "HOME="+s.home, "XDG_CONFIG_HOME="+s.home)
	s.started = time.Now()
	require.NoError(t, s.cmd.Start())
	go func() {
		s.waitErr = s.cmd.Wait()
		_ = out.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
			return
		default:
		}
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(90 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("hyperfleet-dev up printed:\n%s", tail(s.outFile, 150))
		}
		if keep := os.Getenv(envKeepLogs); keep != "" {
			s.keepLogs(t, keep)
		}
	})

	s.waitFor(t, 5*time.Minute, "every component to be ready", func() bool {
		st, err := readUpState(filepath.Join(s.devDir, "up.json"))
		if err != nil || len(st.Components) == 0 {
			return false
		}
		for _, c := range st.Components {
			if !c.Ready {
				return false
			}
		}
		return true
	})
	s.ready = time.Since(s.started)
	return s
}

// freeAddrs picks loopback ports that are free now: all listened on at once, so that no two are the same.
func freeAddrs(t *testing.T) addrs {
	t.Helper()
	var ls []net.Listener
	next := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		return l.Addr().String()
	}
	a := addrs{api: next(), health: next(), metrics: next(), kube: next(), etcd: next(), cincinnati: next(),
		hivelocity: next(), hypershift: next(), resolver: next(), applier: next(), provisioner: next(),
		kubeB: next(), etcdB: next(), hypershiftB: next(), placer: next()}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return a
}

// upState is the part of hyperfleet-dev up's state file (<dev-dir>/up.json) the tests read.
type upState struct {
	Components []upComponent `json:"components"`
}

type upComponent struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
}

func readUpState(path string) (upState, error) {
	var st upState
	b, err := os.ReadFile(path) //nolint:gosec // the test's own dev dir
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(b, &st)
	return st, err
}

// component reads one component's state from up.json.
func (s *system) component(t *testing.T, name string) upComponent {
	t.Helper()
	st, err := readUpState(filepath.Join(s.devDir, "up.json"))
	require.NoError(t, err)
	for _, c := range st.Components {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no component %s in up.json", name)
	return upComponent{}
}

// kill sends SIGKILL to one component's process, as `kill -9` would, and returns its restart count before.
func (s *system) kill(t *testing.T, name string) int {
	t.Helper()
	c := s.component(t, name)
	require.NotZero(t, c.PID, "%s has no process", name)
	require.NoError(t, syscall.Kill(c.PID, syscall.SIGKILL))
	t.Logf("killed %s (pid %d) with SIGKILL", name, c.PID)
	return c.Restarts
}

// stop interrupts up, as Ctrl-C does, and returns how long it took to stop everything.
func (s *system) stop(t *testing.T) time.Duration {
	t.Helper()
	begin := time.Now()
	require.NoError(t, s.cmd.Process.Signal(os.Interrupt))
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("hyperfleet-dev up did not stop within 2 minutes")
	}
	require.NoError(t, s.waitErr, "hyperfleet-dev up exit")
	return time.Since(begin)
}

// cli runs the hyperfleet CLI with the system's configuration and returns its stdout; it fails the test on a
// non-zero exit. While the API is being restarted the command is run again, for up to a minute, as a developer
// would: any command whose connection was refused (no request reached the API), and a command that only reads
// whatever became of its connection.
func (s *system) cli(t *testing.T, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	readOnly := slices.Contains([]string{"get", "list", "wait", "statuses"}, args[0])
	for {
		out, errOut, err := s.run(t, filepath.Join(s.bin, "hyperfleet"), args...)
		unreachable := strings.Contains(errOut, "connection refused") || (readOnly && strings.Contains(errOut, "cannot reach the HyperFleet API"))
		if err != nil && unreachable && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		require.NoError(t, err, "hyperfleet %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
		return out
	}
}

// dev runs hyperfleet-dev (publish) and returns its stdout.
func (s *system) dev(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := s.run(t, filepath.Join(s.bin, "hyperfleet-dev"), args...)
	require.NoError(t, err, "hyperfleet-dev %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

func (s *system) run(t *testing.T, bin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+s.home, "XDG_CONFIG_HOME="+s.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// client is the generated API client with the user token `up` minted.
func (s *system) client(t *testing.T) *api.ClientWithResponses {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(s.devDir, "user.token"))
	require.NoError(t, err)
	c, err := api.NewClientWithResponses("http://"+s.addrs.api, api.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}),
		api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
			return nil
		}))
	require.NoError(t, err)
	return c
}

// waitFor polls cond every 200 ms until it holds, failing after d.
func (s *system) waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		select {
		case <-s.exited:
			t.Fatalf("hyperfleet-dev up exited (%v) while waiting for %s", s.waitErr, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // a loopback URL of the system under test
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path) //nolint:gosec // the test's own file
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// processRuns reports whether pid is a live process (not a zombie).
func processRuns(pid int) bool {
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z"))
}

// keepLogs copies the run's logs into dir.
func (s *system) keepLogs(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(s.devDir, "logs", "*.log"))
	for _, f := range append(files, s.outFile) {
		b, err := os.ReadFile(f) //nolint:gosec // the test's own files
		if err == nil {
			err = os.MkdirAll(dir, 0o700)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600)
		}
		if err != nil {
			t.Logf("keeping %s: %v", f, err)
		}
	}
	t.Logf("logs kept in %s", dir)
}
