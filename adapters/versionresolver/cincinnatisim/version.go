package cincinnatisim

import (
	"fmt"

	mmsemver "github.com/Masterminds/semver/v3"
)

// semver is a release version. Masterminds/semver parses and orders it: a GA release sorts above its own
// pre-releases, numeric pre-release parts compare as numbers (rc.10 > rc.9), build metadata is ignored.
type semver struct{ v *mmsemver.Version }

// parseVersion accepts only full major.minor.patch versions, as release graphs carry.
func parseVersion(s string) (semver, error) {
	v, err := mmsemver.StrictNewVersion(s)
	if err != nil {
		return semver{}, fmt.Errorf("%w: %q: %w", ErrInvalidVersion, s, err)
	}
	return semver{v: v}, nil
}

func (a semver) sameMinor(b semver) bool {
	return a.v.Major() == b.v.Major() && a.v.Minor() == b.v.Minor()
}

func (a semver) compare(b semver) int { return a.v.Compare(b.v) }

// followsMinor reports whether b's minor is the one right after a's, in the same major.
func (a semver) followsMinor(b semver) bool {
	return a.v.Major() == b.v.Major() && a.v.Minor()+1 == b.v.Minor()
}

func (a semver) prerelease() bool { return a.v.Prerelease() != "" }
