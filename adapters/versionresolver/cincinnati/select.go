package cincinnati

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Sentinel errors returned (wrapped) by Latest; check them with errors.Is.
var (
	// ErrInvalidTarget means the target is not a "major.minor" such as "4.16".
	ErrInvalidTarget = errors.New("invalid target version")
	// ErrVersionNotFound means the graph has no selectable release of the target minor.
	ErrVersionNotFound = errors.New("version not found")
)

var targetRE = regexp.MustCompile(`^\d+\.\d+$`)

// Release is a selected release: its semver version as written in the graph
// and its payload, the release image pull spec.
type Release struct {
	Version string
	Image   string
}

// Latest returns the newest release of the target minor ("4.16") in g.
//
// Candidates are the nodes whose version parses as strict semver (nodes that do
// not are skipped, not fatal) and whose major.minor equals target; nodes of
// other minors are ignored. Pre-releases (4.16.0-rc.1, 4.16.0-ec.2, …) are
// candidates only when allowPrerelease is true (see AllowsPrerelease). The
// newest candidate by semver precedence wins: 4.16.10 beats 4.16.9, and a GA
// release beats every pre-release of the same version. Build metadata is
// ignored; among nodes of equal precedence the first in the graph wins.
//
// Latest returns an error wrapping ErrInvalidTarget if target is not
// major.minor, and ErrVersionNotFound if no candidate exists (including a nil or
// empty graph). It knows nothing of the previously resolved version: callers
// that must never move backwards check the result with Newer.
func Latest(g *Graph, target string, allowPrerelease bool) (Release, error) {
	major, minor, err := parseTarget(target)
	if err != nil {
		return Release{}, err
	}
	var (
		best    *semver.Version
		release Release
	)
	if g != nil {
		for _, n := range g.Nodes {
			v, err := semver.StrictNewVersion(n.Version)
			if err != nil || v.Major() != major || v.Minor() != minor {
				continue
			}
			if v.Prerelease() != "" && !allowPrerelease {
				continue
			}
			if best == nil || v.GreaterThan(best) {
				best, release = v, Release{Version: n.Version, Image: n.Payload}
			}
		}
	}
	if best == nil {
		kind := "release"
		if allowPrerelease {
			kind = "release or pre-release"
		}
		return Release{}, fmt.Errorf("%w: no %s of %s in the graph", ErrVersionNotFound, kind, target)
	}
	return release, nil
}

// Newer reports whether candidate is strictly newer than current by semver
// precedence (4.16.10 > 4.16.9; 4.16.0 > 4.16.0-rc.3 > 4.16.0-ec.1). It is the
// "never move backwards" rule: a reconciler switches to the candidate only when
// Newer is true and otherwise keeps current and its image. That covers both a
// graph whose newest release is older than current and a current that vanished
// from the graph (check that with Find to report it).
//
// An empty current (nothing resolved yet) makes any valid candidate newer. An
// unparsable candidate is never newer. An unparsable non-empty current is
// treated like an empty one, since it cannot be compared and the resolver only
// ever stores versions that parsed. Callers must compare only against a current
// resolved for the same target: after a target change the old version is not a
// floor.
func Newer(candidate, current string) bool {
	c, err := semver.StrictNewVersion(candidate)
	if err != nil {
		return false
	}
	if current == "" {
		return true
	}
	cur, err := semver.StrictNewVersion(current)
	if err != nil {
		return true
	}
	return c.GreaterThan(cur)
}

// Find returns the release of g whose version equals version by semver
// precedence (so "4.16.3" matches "4.16.3+build"), and whether there is one.
// Use it to tell that the current resolved version has vanished from the graph.
func Find(g *Graph, version string) (Release, bool) {
	want, err := semver.StrictNewVersion(version)
	if err != nil || g == nil {
		return Release{}, false
	}
	for _, n := range g.Nodes {
		v, err := semver.StrictNewVersion(n.Version)
		if err == nil && v.Equal(want) {
			return Release{Version: n.Version, Image: n.Payload}, true
		}
	}
	return Release{}, false
}

// CheckTarget returns an error wrapping ErrInvalidTarget unless target is a major.minor such as "4.16".
func CheckTarget(target string) error {
	_, _, err := parseTarget(target)
	return err
}

func parseTarget(target string) (major, minor uint64, err error) {
	if !targetRE.MatchString(target) {
		return 0, 0, fmt.Errorf("%w: %q (want major.minor, e.g. 4.16)", ErrInvalidTarget, target)
	}
	ma, mi, _ := strings.Cut(target, ".")
	major, errMajor := strconv.ParseUint(ma, 10, 64)
	minor, errMinor := strconv.ParseUint(mi, 10, 64)
	if err := errors.Join(errMajor, errMinor); err != nil {
		return 0, 0, fmt.Errorf("%w: %q: %w", ErrInvalidTarget, target, err)
	}
	return major, minor, nil
}
