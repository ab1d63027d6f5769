package cincinnati

import (
	"errors"
	"fmt"
)

// ErrInvalidArch is returned by Arch for an architecture Cincinnati does not serve.
var ErrInvalidArch = errors.New("invalid architecture")

// CandidateGroup is the channel group whose graphs carry pre-releases (rc, ec)
// that the resolver may select.
const CandidateGroup = "candidate"

// Channel returns the Cincinnati channel for a channel group and a major.minor
// target: Channel("stable", "4.16") == "stable-4.16". It does not validate its
// inputs; the API validates the VersionStream spec and Latest validates target.
func Channel(group, target string) string {
	return group + "-" + target
}

// AllowsPrerelease reports whether releases with a pre-release tag may be
// selected from group's graphs: only in the candidate group.
func AllowsPrerelease(group string) bool {
	return group == CandidateGroup
}

// Arch returns arch as Cincinnati expects it in the arch query parameter. The
// architectures Cincinnati serves (amd64, arm64, ppc64le, s390x and multi for
// multi-arch payloads) already use Cincinnati's names and are returned as is;
// anything else returns an error wrapping ErrInvalidArch.
func Arch(arch string) (string, error) {
	switch arch {
	case "amd64", "arm64", "ppc64le", "s390x", "multi":
		return arch, nil
	default:
		return "", fmt.Errorf("%w: %q (want amd64, arm64, ppc64le, s390x or multi)", ErrInvalidArch, arch)
	}
}
