package kinds

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// transitions are the per-kind rules on how a stored spec may change, by kind name: what the schema cannot say
// because it sees one spec at a time.
func transitions() map[string]func(before, after map[string]any) error {
	return map[string]func(before, after map[string]any) error{
		"VersionStream": versionStreamTransition,
	}
}

// immutableHints say, by kind name, what to do instead of changing a field that cannot change.
func immutableHints() map[string]string {
	return map[string]string{
		// The provisioner would otherwise keep the devices it has and report them ready in the old place: a
		// device cannot move to another location, type or rack.
		"NodePool": "a pool's devices cannot move to another region, device type or selector: create a new node pool with the new placement and scale this one down to 0",
	}
}

// versionStreamTransition lets a stream's target_version move forward by one minor at a time, or stay: every
// cluster on the stream follows it, and OpenShift upgrades one minor at a time and never downgrades, so a jump or
// a step back would roll every one of them to a release it cannot reach. An admin can force either (force=true),
// for a stream no cluster follows yet or a repair.
func versionStreamTransition(before, after map[string]any) error {
	from, _ := before["target_version"].(string)
	to, _ := after["target_version"].(string)
	if from == to {
		return nil
	}
	fromMajor, fromMinor, okFrom := majorMinor(from)
	toMajor, toMinor, okTo := majorMinor(to)
	if !okFrom || !okTo {
		return nil // the schema's pattern has refused a malformed new value; a malformed stored one cannot be judged
	}
	var why string
	switch {
	case toMajor != fromMajor:
		why = fmt.Sprintf("changes the major version (%s to %s)", from, to)
	case toMinor < fromMinor:
		why = fmt.Sprintf("goes back from %s to %s", from, to)
	case toMinor > fromMinor+1:
		why = fmt.Sprintf("skips minors from %s to %s: the next is %d.%d", from, to, fromMajor, fromMinor+1)
	default:
		return nil
	}
	return &resource.Error{Code: resource.CodeTransition,
		Message: "target_version " + why + "; a stream moves forward one minor at a time (an admin may force it with force=true)",
		Fields:  []resource.FieldError{{Field: "target_version", Message: "must be " + from + " or " + fmt.Sprintf("%d.%d", fromMajor, fromMinor+1)}}}
}

// majorMinor reads "4.16" as 4 and 16.
func majorMinor(v string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	major, errA := strconv.Atoi(a)
	minor, errB := strconv.Atoi(b)
	return major, minor, errA == nil && errB == nil
}
