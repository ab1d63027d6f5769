package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/atomicfile"
)

// State is what the state file holds: every component as of Updated.
type State struct {
	Updated    time.Time        `json:"updated"`
	Supervisor int              `json:"supervisor_pid"`
	Components []ComponentState `json:"components"`
}

// ComponentState is one component in the state file.
type ComponentState struct {
	Name     string    `json:"name"`
	Phase    Phase     `json:"phase"`
	Ready    bool      `json:"ready"`
	PID      int       `json:"pid,omitempty"`
	Restarts int       `json:"restarts"`
	Since    time.Time `json:"since"`
	LastExit string    `json:"last_exit,omitempty"`
	Log      string    `json:"log,omitempty"`
}

// Snapshot returns every component's state now.
func (s *Supervisor) Snapshot() State {
	st := State{Updated: time.Now().UTC(), Supervisor: os.Getpid()}
	for _, c := range s.components {
		c.mu.Lock()
		st.Components = append(st.Components, ComponentState{
			Name: c.spec.Name, Phase: c.phase, Ready: c.ready, PID: c.pid, Restarts: c.restarts,
			Since: c.since.UTC(), LastExit: c.lastExit, Log: logPath(s.cfg.LogDir, c.spec.Name),
		})
		c.mu.Unlock()
	}
	return st
}

// writeState rewrites the state file, if there is one; a failure is reported on the console, not fatal.
func (s *Supervisor) writeState() {
	if s.cfg.StateFile == "" {
		return
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if err := writeJSONAtomic(s.cfg.StateFile, s.Snapshot()); err != nil {
		s.Warnf("cannot write the state file: %v", err)
	}
}

// ReadState reads a state file written by a running supervisor.
func ReadState(path string) (State, error) {
	var st State
	data, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("supervisor: state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("supervisor: state %s: %w", path, err)
	}
	return st, nil
}

// Component returns the named component's state and whether there is one.
func (st State) Component(name string) (ComponentState, bool) {
	for _, c := range st.Components {
		if c.Name == name {
			return c, true
		}
	}
	return ComponentState{}, false
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}
