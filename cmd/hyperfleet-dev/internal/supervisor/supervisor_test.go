package supervisor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
)

// rig runs a supervisor over test children (see child_test.go) in a directory of its own.
type rig struct {
	dir     string
	events  string
	console *logbuf.Buffer
	sup     *supervisor.Supervisor
	kill    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run returned, with err set
	err     error
}

func newRig(tb testing.TB) *rig {
	tb.Helper()
	dir := tb.TempDir()
	return &rig{dir: dir, events: filepath.Join(dir, "events"), console: &logbuf.Buffer{}, kill: make(chan struct{})}
}

// spec is a child of the given mode, ready once it serves.
func (r *rig) spec(name, mode string, deps ...string) supervisor.Spec {
	addr := filepath.Join(r.dir, name+".addr")
	return supervisor.Spec{
		Name:      name,
		Command:   os.Args[0],
		Env:       []string{envChild + "=" + mode, envName + "=" + name, envEvents + "=" + r.events, envAddrFile + "=" + addr},
		DependsOn: deps,
		Before: func() error {
			if err := os.Remove(addr); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		},
		Ready: func(ctx context.Context) error {
			b, err := os.ReadFile(addr)
			if err != nil {
				return err
			}
			return supervisor.HTTPProbe(nil, "http://"+string(b)+"/readyz")(ctx)
		},
		StopTimeout: 5 * time.Second,
	}
}

func (r *rig) config() supervisor.Config {
	return supervisor.Config{
		Console: r.console, LogDir: filepath.Join(r.dir, "logs"), StateFile: filepath.Join(r.dir, "state.json"),
		ProbeInterval: 20 * time.Millisecond, HealthInterval: 50 * time.Millisecond,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, ResetAfter: time.Minute,
	}
}

// start runs the supervisor until the test ends or stop is called.
func (r *rig) start(tb testing.TB, cfg supervisor.Config, specs ...supervisor.Spec) {
	tb.Helper()
	sup, err := supervisor.New(cfg, specs)
	require.NoError(tb, err)
	r.sup = sup
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		r.err = sup.Run(ctx, r.kill)
		close(r.done)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			tb.Errorf("supervisor still running 30s after the test")
		}
	})
}

// stop cancels the supervisor and requires it to return within d.
func (r *rig) stop(tb testing.TB, d time.Duration) {
	tb.Helper()
	r.cancel()
	select {
	case <-r.done:
		require.NoError(tb, r.err)
	case <-time.After(d):
		tb.Fatalf("supervisor did not stop within %s:\n%s", d, r.console.String())
	}
}

func (r *rig) waitAllReady(tb testing.TB) {
	tb.Helper()
	select {
	case <-r.sup.AllReady():
	case <-time.After(30 * time.Second):
		tb.Fatalf("not all ready after 30s:\n%s", r.console.String())
	}
}

func (r *rig) component(tb testing.TB, name string) supervisor.ComponentState {
	tb.Helper()
	c, ok := r.sup.Snapshot().Component(name)
	require.True(tb, ok, name)
	return c
}

// waitFor polls cond until it holds, failing with the console after 30s.
func (r *rig) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s:\n%s", what, r.console.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rig) eventLines(tb testing.TB) []string {
	tb.Helper()
	b, err := os.ReadFile(r.events)
	require.NoError(tb, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestNewRefusesBadSpecs(t *testing.T) {
	cmd := func(name string, deps ...string) supervisor.Spec {
		return supervisor.Spec{Name: name, Command: "/bin/true", DependsOn: deps}
	}
	task := func(context.Context, *slog.Logger) error { return nil }
	tests := []struct {
		name  string
		specs []supervisor.Spec
		want  string
	}{
		{"no name", []supervisor.Spec{{Command: "/bin/true"}}, "no name"},
		{"twice", []supervisor.Spec{cmd("a"), cmd("a")}, "two components named a"},
		{"neither command nor func", []supervisor.Spec{{Name: "a"}}, "exactly one of Command and Func"},
		{"both command and func", []supervisor.Spec{{Name: "a", Command: "/bin/true", Func: task}}, "exactly one of Command and Func"},
		{"unknown dependency", []supervisor.Spec{cmd("a", "b")}, "unknown component b"},
		{"restart without dependency", []supervisor.Spec{cmd("a"), {Name: "b", Command: "/bin/true", RestartWith: []string{"a"}}}, "does not depend on it"},
		{"cycle", []supervisor.Spec{cmd("a", "c"), cmd("b", "a"), cmd("c", "b")}, "dependency cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := supervisor.New(supervisor.Config{}, tt.specs)
			require.ErrorIs(t, err, supervisor.ErrInvalidSpec)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestStartsInOrderStopsInReverse starts a chain db ← migrate (a job) ← api ← adapter and checks that each starts
// only once what it depends on is ready, and stops only once what depends on it, directly or through the finished
// job, has stopped.
func TestStartsInOrderStopsInReverse(t *testing.T) {
	r := newRig(t)
	migrate := supervisor.Spec{
		Name: "migrate", Command: os.Args[0], Job: true, DependsOn: []string{"db"},
		Env: []string{envChild + "=" + modeJob, envName + "=migrate", envEvents + "=" + r.events, envCounter + "=" + filepath.Join(r.dir, "runs")},
	}
	r.start(t, r.config(), r.spec("adapter", modeServe, "api"), r.spec("api", modeServe, "migrate"), migrate, r.spec("db", modeServe))
	r.waitAllReady(t)
	for _, name := range []string{"db", "api", "adapter"} {
		c := r.component(t, name)
		require.Equal(t, supervisor.PhaseReady, c.Phase, name)
		require.NotZero(t, c.PID, name)
	}
	r.stop(t, 20*time.Second)
	require.Equal(t, []string{
		"db start", "migrate start", "api start", "adapter start",
		"adapter stop", "api stop", "db stop",
	}, r.eventLines(t))
	for _, name := range []string{"db", "api", "adapter"} {
		require.Equal(t, supervisor.PhaseStopped, r.component(t, name).Phase)
	}
	st, err := supervisor.ReadState(filepath.Join(r.dir, "state.json"))
	require.NoError(t, err)
	c, ok := st.Component("api")
	require.True(t, ok)
	require.Equal(t, supervisor.PhaseStopped, c.Phase)
	require.FileExists(t, c.Log)
}

// TestRestartsAKilledComponent kills a component with SIGKILL twice: it comes back each time with a new pid, the
// console says so, and the second wait is longer than the first.
func TestRestartsAKilledComponent(t *testing.T) {
	r := newRig(t)
	r.start(t, r.config(), r.spec("api", modeServe))
	r.waitAllReady(t)
	for restart := 1; restart <= 2; restart++ {
		before := r.component(t, "api")
		require.NoError(t, syscall.Kill(before.PID, syscall.SIGKILL))
		r.waitFor(t, fmt.Sprintf("restart %d", restart), func() bool {
			c := r.component(t, "api")
			return c.Phase == supervisor.PhaseReady && c.PID != before.PID && c.Restarts == restart
		})
	}
	out := r.console.String()
	require.Contains(t, out, "api signal: killed after")
	require.Contains(t, out, "restarting in 50ms (restart 1)")
	require.Contains(t, out, "restarting in 100ms (restart 2)")
	require.Equal(t, "signal: killed", r.component(t, "api").LastExit)
}

// TestStopKillsWhatIgnoresSIGTERM stops a child that ignores SIGTERM: after its grace period it is killed.
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	r := newRig(t)
	spec := r.spec("stubborn", modeIgnoreTerm)
	spec.StopTimeout = 300 * time.Millisecond
	r.start(t, r.config(), spec)
	r.waitAllReady(t)
	pid := r.component(t, "stubborn").PID
	r.stop(t, 10*time.Second)
	require.Contains(t, r.console.String(), "stubborn did not stop within 300ms; killing it")
	waitGone(t, pid, 5*time.Second)
}

// TestKillSkipsTheGracePeriod closes the kill channel while a stop waits out a long grace period.
func TestKillSkipsTheGracePeriod(t *testing.T) {
	r := newRig(t)
	spec := r.spec("stubborn", modeIgnoreTerm)
	spec.StopTimeout = time.Hour
	r.start(t, r.config(), spec)
	r.waitAllReady(t)
	r.cancel()
	r.waitFor(t, "stopping", func() bool { return r.component(t, "stubborn").Phase == supervisor.PhaseStopping })
	close(r.kill)
	r.stop(t, 10*time.Second)
}

// TestStopsWhatADeadComponentLeftBehind kills a child that started a grandchild in its process group: the
// grandchild is stopped before the child starts again.
func TestStopsWhatADeadComponentLeftBehind(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(r.dir, "grandchild.pid")
	spec := r.spec("parent", modeSpawn)
	spec.Env = append(spec.Env, envPIDFile+"="+pidFile)
	r.start(t, r.config(), spec)
	r.waitAllReady(t)
	var grandchild int
	r.waitFor(t, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		_, err = fmt.Sscan(string(b), &grandchild)
		return err == nil
	})
	require.True(t, alive(grandchild))
	require.NoError(t, syscall.Kill(r.component(t, "parent").PID, syscall.SIGKILL))
	waitGone(t, grandchild, 10*time.Second)
	require.Contains(t, r.console.String(), "parent left processes behind in its process group")
	r.waitFor(t, "the restart", func() bool { return r.component(t, "parent").Restarts == 1 && r.component(t, "parent").Ready })
}

// TestJobsAndTasksRetryUntilDone runs a job that fails twice and a task that fails once before a service that
// depends on both: the service starts only after both are done.
func TestJobsAndTasksRetryUntilDone(t *testing.T) {
	r := newRig(t)
	job := supervisor.Spec{
		Name: "migrate", Command: os.Args[0], Job: true,
		Env: []string{envChild + "=" + modeJob, envName + "=migrate", envEvents + "=" + r.events,
			envCounter + "=" + filepath.Join(r.dir, "runs"), envFailRuns + "=2"},
	}
	var tries int
	task := supervisor.Spec{Name: "seed", DependsOn: []string{"migrate"}, Func: func(_ context.Context, log *slog.Logger) error {
		tries++
		if tries == 1 {
			return errors.New("api not answering yet")
		}
		log.Info("seeded", "streams", 1)
		return nil
	}}
	r.start(t, r.config(), job, task, r.spec("api", modeServe, "migrate", "seed"))
	r.waitAllReady(t)
	require.Equal(t, []string{"migrate start", "migrate start", "migrate start", "api start"}, r.eventLines(t))
	out := r.console.String()
	require.Contains(t, out, "migrate exit status 1 after")
	require.Contains(t, out, "seed api not answering yet after")
	require.Contains(t, out, "migrate done in")
	require.Contains(t, out, "seed done in")
	require.Contains(t, out, "seeded streams=1")
	require.Equal(t, 2, r.component(t, "migrate").Restarts)
	require.Equal(t, supervisor.PhaseReady, r.component(t, "migrate").Phase)
	log, err := os.ReadFile(r.component(t, "migrate").Log)
	require.NoError(t, err)
	require.Equal(t, "job run 1\njob run 2\njob run 3\n", string(log))
}

// TestRestartsWithADependency kills a component that another restarts with: once it is ready again, the other
// is restarted too; a plain dependent is left alone.
func TestRestartsWithADependency(t *testing.T) {
	r := newRig(t)
	follower := r.spec("applier", modeServe, "kube")
	follower.RestartWith = []string{"kube"}
	r.start(t, r.config(), r.spec("kube", modeServe), follower, r.spec("sim", modeServe, "kube"))
	r.waitAllReady(t)
	applier, sim := r.component(t, "applier").PID, r.component(t, "sim").PID
	require.NoError(t, syscall.Kill(r.component(t, "kube").PID, syscall.SIGKILL))
	r.waitFor(t, "the applier's restart", func() bool {
		c := r.component(t, "applier")
		return c.Ready && c.PID != applier
	})
	require.Equal(t, sim, r.component(t, "sim").PID)
	require.Contains(t, r.console.String(), "kube restarted: restarting applier")
	require.Zero(t, r.component(t, "applier").Restarts, "a restart with a dependency is not a crash")
}

// TestReportsUnhealthyWithoutRestarting makes a ready component's health probe fail and pass again.
func TestReportsUnhealthyWithoutRestarting(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	healthy := true
	spec := r.spec("api", modeServe)
	spec.Health = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !healthy {
			return errors.New("database unreachable")
		}
		return nil
	}
	r.start(t, r.config(), spec)
	r.waitAllReady(t)
	pid := r.component(t, "api").PID
	mu.Lock()
	healthy = false
	mu.Unlock()
	r.waitFor(t, "unhealthy", func() bool { return r.component(t, "api").Phase == supervisor.PhaseUnhealthy })
	mu.Lock()
	healthy = true
	mu.Unlock()
	r.waitFor(t, "healthy again", func() bool { return r.component(t, "api").Phase == supervisor.PhaseReady })
	require.Equal(t, pid, r.component(t, "api").PID)
	out := r.console.String()
	require.Contains(t, out, "api is unhealthy: database unreachable")
	require.Contains(t, out, "api is healthy again")
}

// TestConsoleLines checks the prefix, the rendering of JSON log lines and that colours appear only when asked.
func TestConsoleLines(t *testing.T) {
	for _, color := range []bool{false, true} {
		t.Run(fmt.Sprintf("color=%v", color), func(t *testing.T) {
			r := newRig(t)
			cfg := r.config()
			cfg.Color = color
			spec := r.spec("api", modeLog)
			spec.Quiet = func(line []byte) bool { return bytes.Contains(line, []byte("plain")) }
			r.start(t, cfg, spec)
			r.waitAllReady(t)
			r.stop(t, 10*time.Second)
			out := r.console.String()
			stamp := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC).Local().Format("15:04:05.000")
			if !color {
				require.NotContains(t, out, "\x1b[")
				require.Contains(t, out, "api            │ "+stamp+` WARN  disk low free="3 GB" n=7`+"\n")
				require.NotContains(t, out, "plain line", "quiet lines stay off the console")
				log, err := os.ReadFile(filepath.Join(r.dir, "logs", "api.log"))
				require.NoError(t, err)
				require.Contains(t, string(log), "plain line\n", "and go to the log file")
				require.Contains(t, out, "hyperfleet-dev │ api ready in")
				require.Contains(t, out, "hyperfleet-dev │ all stopped in")
				return
			}
			require.Contains(t, out, "\x1b[36mapi           \x1b[0m │ \x1b[33m"+stamp+" WARN ")
		})
	}
}

// TestChildrenDieWithTheSupervisor kills a supervisor with SIGKILL: the kernel sends its child SIGTERM.
func TestChildrenDieWithTheSupervisor(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	cmd := exec.Command(os.Args[0]) //nolint:gosec,noctx // the test binary itself
	cmd.Env = append(os.Environ(), envChild+"="+modeSupervisor, envAddrFile+"="+state)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		if st, err := supervisor.ReadState(state); err == nil {
			if c, ok := st.Component("orphan"); ok && c.Ready {
				pid = c.PID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotZero(t, pid, "the supervisor did not report its child ready")
	require.NoError(t, cmd.Process.Kill())
	<-exited
	waitGone(t, pid, 10*time.Second)
}
