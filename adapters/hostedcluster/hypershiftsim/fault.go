package hypershiftsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
)

// FailMode is how a rollout of a failing release goes wrong.
type FailMode string

// The ways a release fails.
const (
	// FailDegraded: after the rollout's delay the history entry stays Partial and Degraded turns True (reason
	// ReasonReleaseFailed); a cluster that was Available stays Available, as a control plane that rolled part of
	// the way does.
	FailDegraded FailMode = "Degraded"
	// FailStuck: the history entry stays Partial and Progressing True for ever, and nothing says why, as with an
	// operator that never finishes.
	FailStuck FailMode = "Stuck"
)

// ReasonReleaseFailed is Degraded's reason for a release made to fail. It is the simulator's own: HyperShift's
// reason names whichever component failed.
const ReasonReleaseFailed = "ReleaseFailed"

// msgReleaseFailed is Degraded's message for a release made to fail.
const msgReleaseFailed = "The simulator was told that this release fails to roll out"

// ErrInvalidFailure is wrapped by Failures.Set for a failure that cannot be applied.
var ErrInvalidFailure = errors.New("hypershiftsim: invalid release failure")

// Failure makes the rollouts of one release fail, on every HostedCluster or on a share of them.
type Failure struct {
	// Version is the release version, as the rollout reports it (the image's tag, or the
	// hyperfleet.io/release-version annotation).
	Version string `json:"version"`
	// Mode is FailDegraded or FailStuck.
	Mode FailMode `json:"mode"`
	// Percent is the share of HostedClusters whose rollout fails, 1 to 100; 0 means 100. Which ones is fixed by a
	// hash of namespace, name and version, so the same clusters fail every time and a test can count them.
	Percent int `json:"percent,omitempty"`
}

// Failures is the set of failing releases, one Failure per version. The zero value fails nothing; it is safe
// for concurrent use, so that an admin endpoint can change it while the simulator runs.
type Failures struct {
	mu     sync.Mutex
	byName map[string]Failure
}

// Set makes f.Version fail as f says, replacing any earlier failure of that version. It returns an error wrapping
// ErrInvalidFailure, and changes nothing, for an empty version, an unknown mode or a percent outside 0–100.
func (fs *Failures) Set(f Failure) error {
	switch {
	case f.Version == "":
		return fmt.Errorf("%w: no version", ErrInvalidFailure)
	case f.Mode != FailDegraded && f.Mode != FailStuck:
		return fmt.Errorf("%w: mode %q is neither %s nor %s", ErrInvalidFailure, f.Mode, FailDegraded, FailStuck)
	case f.Percent < 0 || f.Percent > 100:
		return fmt.Errorf("%w: percent %d is outside 0-100", ErrInvalidFailure, f.Percent)
	}
	if f.Percent == 0 {
		f.Percent = 100
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.byName == nil {
		fs.byName = map[string]Failure{}
	}
	fs.byName[f.Version] = f
	return nil
}

// Clear makes version roll out normally again; an empty version clears every failure. Rollouts held by a failure
// complete at their next look (within Options.Delay, or a second).
func (fs *Failures) Clear(version string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if version == "" {
		fs.byName = nil
		return
	}
	delete(fs.byName, version)
}

// List returns the failures in effect, ordered by version.
func (fs *Failures) List() []Failure {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := slices.AppendSeq(make([]Failure, 0, len(fs.byName)), maps.Values(fs.byName))
	slices.SortFunc(out, func(a, b Failure) int { return strings.Compare(a.Version, b.Version) })
	return out
}

// modeFor returns how the rollout of version on the HostedCluster namespace/name fails, or "" if it does not.
func (fs *Failures) modeFor(namespace, name, version string) FailMode {
	if fs == nil {
		return ""
	}
	fs.mu.Lock()
	f, ok := fs.byName[version]
	fs.mu.Unlock()
	if !ok || !selected(namespace, name, version, f.Percent) {
		return ""
	}
	return f.Mode
}

// selected reports whether the HostedCluster namespace/name is among the percent of clusters a failure of version
// hits: a hash, so the choice is stable and about evenly spread.
func selected(namespace, name, version string, percent int) bool {
	if percent >= 100 {
		return true
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name + "@" + version))
	return int(h.Sum32()%100) < percent
}
