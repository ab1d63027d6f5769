package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Phase is where a component is in its life.
type Phase string

// Phases, as the state file and the messages name them.
const (
	PhaseWaiting   Phase = "waiting"   // for its dependencies
	PhaseStarting  Phase = "starting"  // started, not ready yet
	PhaseReady     Phase = "ready"     // ready (a job or task: done)
	PhaseUnhealthy Phase = "unhealthy" // was ready, its health probe fails
	PhaseExited    Phase = "exited"    // died; restarting after a backoff
	PhaseStopping  Phase = "stopping"
	PhaseStopped   Phase = "stopped"
)

// component is one Spec at run time.
type component struct {
	spec       Spec
	dependents []*component
	out        *lineWriter
	logFile    *os.File

	mu       sync.Mutex
	phase    Phase
	ready    bool
	readyGen int // counts the times it became ready, so that RestartWith can tell a restart
	pid      int
	restarts int
	since    time.Time
	lastExit string
	changed  chan struct{} // closed and replaced on every change

	stopped chan struct{} // closed when its supervision has ended and its process is gone
}

func newComponent(spec Spec, color string, con *console) *component {
	c := &component{spec: spec, phase: PhaseWaiting, since: time.Now(), changed: make(chan struct{}), stopped: make(chan struct{})}
	c.out = &lineWriter{name: spec.Name, color: color, console: con, quiet: spec.Quiet}
	return c
}

func (c *component) openLog(dir string) error {
	if dir == "" {
		return nil
	}
	f, err := os.OpenFile(logPath(dir, c.spec.Name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("supervisor: log file: %w", err)
	}
	c.logFile = f
	c.out.file = f
	return nil
}

func (c *component) closeLog() {
	c.out.flush()
	if c.logFile != nil {
		_ = c.logFile.Close()
	}
}

// update changes the component's state under its lock and wakes everyone waiting for a change.
func (c *component) update(fn func()) {
	c.mu.Lock()
	fn()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *component) setPhase(p Phase, ready bool) {
	c.update(func() {
		if ready && !c.ready {
			c.readyGen++
		}
		c.phase, c.ready, c.since = p, ready, time.Now()
	})
}

func (c *component) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// waitReady blocks until the component is ready or ctx ends.
func (c *component) waitReady(ctx context.Context) error {
	for {
		c.mu.Lock()
		ready, ch := c.ready, c.changed
		c.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readyGeneration returns how many times the component became ready.
func (c *component) readyGeneration() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyGen
}

// becameReadyAgain sends on the returned channel once the component is ready with a generation other than gen.
func (c *component) becameReadyAgain(ctx context.Context, gen int) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		for {
			c.mu.Lock()
			again, ch := c.ready && c.readyGen != gen, c.changed
			c.mu.Unlock()
			if again {
				close(out)
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// supervise runs c until ctx ends: waiting for its dependencies, starting it, restarting it when it dies or a
// dependency it restarts with did, and stopping it once its dependents have stopped.
func (s *Supervisor) supervise(ctx context.Context, kill <-chan struct{}, c *component) {
	defer close(c.stopped)
	defer func() {
		c.setPhase(PhaseStopped, false)
		s.writeState()
	}()
	streak := 0 // restarts since the component last stayed up for ResetAfter
	for {
		c.setPhase(PhaseWaiting, false)
		s.writeState()
		gens, ok := s.waitDependencies(ctx, c)
		if !ok {
			return
		}
		started := time.Now()
		var err error
		var restartFor string
		if c.spec.Before != nil {
			err = c.spec.Before()
		}
		switch {
		case err != nil:
			err = fmt.Errorf("before start: %w", err)
		case c.spec.Func != nil:
			err = s.runTask(ctx, c)
		default:
			restartFor, err = s.runProcess(ctx, kill, c, gens)
			c.update(func() { c.pid = 0 })
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil && restartFor == "" && (c.spec.Func != nil || c.spec.Job) {
			s.Printf("%s done in %s", c.spec.Name, since(started))
			c.setPhase(PhaseReady, true)
			s.writeState()
			<-ctx.Done()
			return
		}
		if restartFor != "" {
			s.Printf("%s restarted: restarting %s", restartFor, c.spec.Name)
			continue
		}
		if time.Since(started) >= s.cfg.ResetAfter {
			streak = 0
		}
		streak++
		wait := s.backoff(streak)
		what := "exited"
		if err != nil {
			what = err.Error()
		}
		s.Warnf("%s %s after %s; restarting in %s (restart %d)", c.spec.Name, what, since(started), wait, c.restartCount()+1)
		c.update(func() { c.restarts++; c.lastExit = what; c.phase, c.ready, c.pid = PhaseExited, false, 0 })
		s.writeState()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

func (c *component) restartCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// waitDependencies waits until every dependency is ready and returns the ready generations of those c restarts
// with; false if ctx ended first.
func (s *Supervisor) waitDependencies(ctx context.Context, c *component) (map[string]int, bool) {
	for _, d := range c.spec.DependsOn {
		if err := s.byName[d].waitReady(ctx); err != nil {
			return nil, false
		}
	}
	gens := map[string]int{}
	for _, d := range c.spec.RestartWith {
		gens[d] = s.byName[d].readyGeneration()
	}
	return gens, true
}

// waitDependents blocks until every component depending on c, directly or not, has stopped, so that nothing loses
// a dependency while it still runs (a finished job in between, say a migration, stops at once).
func (s *Supervisor) waitDependents(c *component) {
	for _, d := range c.dependents {
		<-d.stopped
		s.waitDependents(d)
	}
}

// runTask runs a Func component once, with a logger that writes JSON lines to its output.
func (s *Supervisor) runTask(ctx context.Context, c *component) error {
	c.update(func() { c.phase, c.pid = PhaseStarting, 0 })
	s.writeState()
	log := slog.New(slog.NewJSONHandler(c.out, nil))
	return c.spec.Func(ctx, log)
}

// runProcess starts c's command and follows it until it exits (its error), a dependency it restarts with is ready
// again (that dependency's name), or ctx ends (then it stops the process once c's dependents have stopped).
func (s *Supervisor) runProcess(ctx context.Context, kill <-chan struct{}, c *component, gens map[string]int) (restartFor string, err error) {
	cmd := exec.Command(c.spec.Command, c.spec.Args...) //nolint:gosec,noctx // the components the supervisor was given; stopped by signals, not a context
	cmd.Env = append(os.Environ(), c.spec.Env...)
	cmd.Stdout, cmd.Stderr = c.out, c.out
	// Output pipes close at the latest this long after the process exits, even if something it started holds them.
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = childAttr()
	started := time.Now()
	if err := s.spawner.start(cmd); err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	pid := cmd.Process.Pid
	c.update(func() { c.phase, c.ready, c.pid, c.since = PhaseStarting, false, pid, started })
	s.writeState()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	runCtx, cancelRun := context.WithCancel(ctx)
	// The health watcher goes with this run, before the caller records how it ended.
	var watcher sync.WaitGroup
	defer func() {
		cancelRun()
		watcher.Wait()
	}()
	readyc := make(chan error, 1)
	go func() { readyc <- s.awaitReady(runCtx, c, started) }()
	restart := make(chan string, 1)
	for dep, gen := range gens {
		again := s.byName[dep].becameReadyAgain(runCtx, gen)
		go func() {
			select {
			case <-again:
				restart <- dep
			case <-runCtx.Done():
			}
		}()
	}
	for {
		select {
		case err = <-exited:
			cancelRun()
			s.stopGroupLeftovers(c, pid)
			if err == nil && !c.spec.Job {
				err = errors.New("exited with status 0")
			}
			return "", err
		case err := <-readyc:
			readyc = nil
			if err != nil {
				continue // ctx ended
			}
			// Said before it counts as ready, so that the message comes before those of what it lets start.
			s.Printf("%s ready in %s", c.spec.Name, since(started))
			c.setPhase(PhaseReady, true)
			s.writeState()
			watcher.Go(func() { s.watchHealth(runCtx, c) })
		case dep := <-restart:
			cancelRun()
			if err := s.stop(c, pid, exited, kill); err != nil {
				s.Printf("%s stopped: %v", c.spec.Name, err)
			}
			return dep, nil
		case <-ctx.Done():
			s.waitDependents(c)
			c.setPhase(PhaseStopping, false)
			s.writeState()
			return "", errors.Join(ctx.Err(), s.stop(c, pid, exited, kill))
		}
	}
}

// awaitReady probes c until it is ready or ctx ends, warning once if that takes longer than its StartTimeout.
func (s *Supervisor) awaitReady(ctx context.Context, c *component, started time.Time) error {
	if c.spec.Ready == nil || c.spec.Job {
		if c.spec.Job {
			<-ctx.Done() // a job is done when it exits
			return ctx.Err()
		}
		return nil
	}
	warned := false
	for {
		probeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.spec.Ready(probeCtx)
		cancel()
		if err == nil {
			return nil
		}
		if !warned && time.Since(started) > c.spec.StartTimeout {
			warned = true
			s.Warnf("%s is not ready after %s (%v); still waiting", c.spec.Name, since(started), err)
		}
		select {
		case <-time.After(s.cfg.ProbeInterval):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchHealth probes a ready component until ctx ends and reports when it turns unhealthy and healthy again.
func (s *Supervisor) watchHealth(ctx context.Context, c *component) {
	probe := c.spec.Health
	if probe == nil {
		probe = c.spec.Ready
	}
	if probe == nil {
		return
	}
	failures := 0
	t := time.NewTicker(s.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		probeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := probe(probeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && failures >= s.cfg.HealthFailures:
			// Said before the state changes, as every message, so that whoever sees the state sees the message.
			s.Printf("%s is healthy again", c.spec.Name)
			c.setPhase(PhaseReady, true)
			s.writeState()
			failures = 0
		case err == nil:
			failures = 0
		default:
			failures++
			if failures == s.cfg.HealthFailures {
				s.Warnf("%s is unhealthy: %v", c.spec.Name, err)
				c.update(func() { c.phase = PhaseUnhealthy })
				s.writeState()
			}
		}
	}
}

// since formats the time since t for messages.
func since(t time.Time) string {
	d := time.Since(t)
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
