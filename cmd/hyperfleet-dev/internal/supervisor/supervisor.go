// Package supervisor runs a set of development processes on one machine: it starts them in dependency order once
// what they depend on is ready, probes their readiness and health, restarts one that dies (with a message and
// exponential backoff), prefixes and colours their logs, and stops them in reverse order, SIGTERM first and SIGKILL
// after a grace period. It is the engine of `hyperfleet-dev up`; it knows nothing of HyperFleet.
//
// Every child runs in a process group of its own, so that a terminal's Ctrl-C reaches the supervisor alone (it
// decides the order of the shutdown), and so that whatever a dead child left behind in its group can be stopped
// before it is started again. On Linux a child also gets SIGTERM if the supervisor itself dies.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Probe checks a component; nil means it passed.
type Probe func(ctx context.Context) error

// Spec describes one component. Exactly one of Command and Func is set.
type Spec struct {
	// Name prefixes the component's log lines and names its log file; it is unique.
	Name string
	// Command and Args are the process to run; Env is added to the supervisor's environment.
	Command string
	Args    []string
	Env     []string
	// Func runs in process instead of a command, with a logger whose lines are shown like a process's. It is a
	// task: done (and ready) once it returns nil, tried again with backoff when it fails.
	Func func(ctx context.Context, log *slog.Logger) error
	// Job marks a command that runs to completion: it is ready once it exits 0, and tried again with backoff when
	// it fails.
	Job bool
	// DependsOn names the components that must be ready before this one starts (also before each restart).
	DependsOn []string
	// RestartWith names dependencies whose restart restarts this component too, once they are ready again: a
	// process that cached something of theirs (credentials, an address) must pick up the new one.
	RestartWith []string
	// Ready says when a started service is ready; nil means as soon as it started.
	Ready Probe
	// Health is probed every Config.HealthInterval once the component is ready; nil means Ready. A failing
	// component is reported, not restarted: it may only be waiting for a dependency that is restarting.
	Health Probe
	// Before runs before every start, e.g. to remove what the previous run left behind.
	Before func() error
	// Quiet, if set, keeps the output lines it returns true for off the console (they still go to the log
	// file): routine chatter such as a server's log line for every poll of its clients.
	Quiet func(line []byte) bool
	// StopSignal asks the process to stop; default SIGTERM. StopTimeout is how long it gets before SIGKILL.
	StopSignal  syscall.Signal
	StopTimeout time.Duration
	// StartTimeout is how long the component may take to become ready before a warning says so (it keeps being
	// waited for).
	StartTimeout time.Duration
}

// Config configures a Supervisor. Zero durations take the defaults in brackets.
type Config struct {
	// Console receives the prefixed, rendered log lines and the supervisor's messages.
	Console io.Writer
	// Color turns on ANSI colours on Console.
	Color bool
	// Raw shows the components' lines as they are, instead of rendering JSON log lines.
	Raw bool
	// LogDir receives each component's raw output in <name>.log, truncated when Run starts; empty: no files.
	LogDir string
	// StateFile, when set, is rewritten with every component's state (State) whenever it changes.
	StateFile string
	// ProbeInterval is how often readiness is probed while a component starts [250ms].
	ProbeInterval time.Duration
	// HealthInterval is how often a ready component's health is probed [2s]; HealthFailures consecutive failures
	// make it reported unhealthy [3].
	HealthInterval time.Duration
	HealthFailures int
	// MinBackoff and MaxBackoff bound the wait before a restart [1s, 30s]; it doubles with every restart and
	// starts again from MinBackoff once a component has stayed up for ResetAfter [30s].
	MinBackoff time.Duration
	MaxBackoff time.Duration
	ResetAfter time.Duration
	// StopTimeout is a component's default grace period between its stop signal and SIGKILL [10s].
	StopTimeout time.Duration
	// StartTimeout is a component's default StartTimeout [1m].
	StartTimeout time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ProbeInterval, 250*time.Millisecond)
	def(&c.HealthInterval, 2*time.Second)
	def(&c.MinBackoff, time.Second)
	def(&c.MaxBackoff, 30*time.Second)
	def(&c.ResetAfter, 30*time.Second)
	def(&c.StopTimeout, 10*time.Second)
	def(&c.StartTimeout, time.Minute)
	if c.HealthFailures <= 0 {
		c.HealthFailures = 3
	}
	if c.Console == nil {
		c.Console = io.Discard
	}
	return c
}

// ErrInvalidSpec is wrapped by New for specs it cannot run.
var ErrInvalidSpec = errors.New("supervisor: invalid spec")

// Supervisor runs components. Build it with New and call Run once.
type Supervisor struct {
	cfg        Config
	components []*component
	byName     map[string]*component
	console    *console
	spawner    *spawner

	stateMu sync.Mutex // one state file write at a time

	allReady chan struct{}
}

// New checks the specs (unique names, known dependencies, no cycle, one of Command and Func) and returns a
// supervisor for them. It returns an error wrapping ErrInvalidSpec otherwise.
func New(cfg Config, specs []Spec) (*Supervisor, error) {
	cfg = cfg.withDefaults()
	s := &Supervisor{cfg: cfg, byName: map[string]*component{}, allReady: make(chan struct{})}
	s.console = newConsole(cfg.Console, cfg.Color, cfg.Raw)
	for i := range specs {
		sp := specs[i]
		switch {
		case sp.Name == "":
			return nil, fmt.Errorf("%w: spec %d has no name", ErrInvalidSpec, i)
		case s.byName[sp.Name] != nil:
			return nil, fmt.Errorf("%w: two components named %s", ErrInvalidSpec, sp.Name)
		case (sp.Command == "") == (sp.Func == nil):
			return nil, fmt.Errorf("%w: %s needs exactly one of Command and Func", ErrInvalidSpec, sp.Name)
		}
		if sp.StopSignal == 0 {
			sp.StopSignal = syscall.SIGTERM
		}
		if sp.StopTimeout <= 0 {
			sp.StopTimeout = cfg.StopTimeout
		}
		if sp.StartTimeout <= 0 {
			sp.StartTimeout = cfg.StartTimeout
		}
		c := newComponent(sp, s.console.colorOf(i), s.console)
		s.console.width = max(s.console.width, len(sp.Name))
		s.components = append(s.components, c)
		s.byName[sp.Name] = c
	}
	for _, c := range s.components {
		for _, d := range append(slices.Clone(c.spec.DependsOn), c.spec.RestartWith...) {
			dep := s.byName[d]
			if dep == nil {
				return nil, fmt.Errorf("%w: %s depends on unknown component %s", ErrInvalidSpec, c.spec.Name, d)
			}
			if !slices.Contains(c.spec.DependsOn, d) {
				return nil, fmt.Errorf("%w: %s restarts with %s but does not depend on it", ErrInvalidSpec, c.spec.Name, d)
			}
		}
		for _, d := range c.spec.DependsOn {
			s.byName[d].dependents = append(s.byName[d].dependents, c)
		}
	}
	if cycle := s.findCycle(); cycle != nil {
		return nil, fmt.Errorf("%w: dependency cycle %v", ErrInvalidSpec, cycle)
	}
	return s, nil
}

// findCycle returns the names along a dependency cycle, or nil.
func (s *Supervisor) findCycle() []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(c *component) []string
	visit = func(c *component) []string {
		switch mark[c.spec.Name] {
		case onPath:
			return append(slices.Clone(path), c.spec.Name)
		case done:
			return nil
		}
		mark[c.spec.Name] = onPath
		path = append(path, c.spec.Name)
		for _, d := range c.spec.DependsOn {
			if cyc := visit(s.byName[d]); cyc != nil {
				return cyc
			}
		}
		path = path[:len(path)-1]
		mark[c.spec.Name] = done
		return nil
	}
	for _, c := range s.components {
		if cyc := visit(c); cyc != nil {
			return cyc
		}
	}
	return nil
}

// AllReady is closed once every component has been ready (jobs and tasks: done) at the same time.
func (s *Supervisor) AllReady() <-chan struct{} { return s.allReady }

// WaitReady blocks until the named component is ready, or ctx ends.
func (s *Supervisor) WaitReady(ctx context.Context, name string) error {
	c := s.byName[name]
	if c == nil {
		return fmt.Errorf("supervisor: no component %s", name)
	}
	return c.waitReady(ctx)
}

// Printf writes a supervisor message to the console.
func (s *Supervisor) Printf(format string, args ...any) {
	s.console.notice(fmt.Sprintf(format, args...))
}

// Println writes lines to the console as they are, with nothing prefixed.
func (s *Supervisor) Println(text string) { s.console.plain(text) }

// Run starts the components and supervises them until ctx ends, then stops them, each only after the components
// depending on it, and returns once all are gone. Cancelling kill (may be nil) skips the grace periods of the
// stops still running. It returns an error only if the supervisor could not work at all (log files).
func (s *Supervisor) Run(ctx context.Context, kill <-chan struct{}) error {
	if s.cfg.LogDir != "" {
		if err := os.MkdirAll(s.cfg.LogDir, 0o700); err != nil {
			return fmt.Errorf("supervisor: log dir: %w", err)
		}
	}
	for _, c := range s.components {
		if err := c.openLog(s.cfg.LogDir); err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range s.components {
			c.closeLog()
		}
	}()
	s.spawner = newSpawner()
	defer s.spawner.close()
	if kill == nil {
		kill = make(chan struct{})
	}
	var wg sync.WaitGroup
	for _, c := range s.components {
		wg.Go(func() { s.supervise(ctx, kill, c) })
	}
	wg.Go(func() { s.watchAllReady(ctx) })
	stopping := make(chan time.Time, 1)
	wg.Go(func() {
		<-ctx.Done()
		stopping <- time.Now()
		s.Printf("stopping every component, dependents first (interrupt again to kill them at once)")
	})
	wg.Wait()
	s.writeState()
	s.Printf("all stopped in %s", since(<-stopping))
	return nil
}

func (s *Supervisor) watchAllReady(ctx context.Context) {
	for {
		all := true
		for _, c := range s.components {
			if err := c.waitReady(ctx); err != nil {
				return
			}
		}
		for _, c := range s.components {
			all = all && c.isReady()
		}
		if all {
			close(s.allReady)
			return
		}
	}
}

// backoff returns the wait before restart n (1-based).
func (s *Supervisor) backoff(n int) time.Duration {
	d := s.cfg.MinBackoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// logPath is where a component's raw output goes.
func logPath(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name+".log")
}
