package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	// The zone database is embedded so that a schedule means the same on every host, the adapter's image
	// included; the host's own database still takes precedence where it exists.
	_ "time/tzdata"
)

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid upgrade schedule")

// WindowSpec is a weekly window as the API spells it.
type WindowSpec struct {
	// Days are the weekdays it opens on, as time.Weekday names ("Saturday"): one to seven, none twice.
	Days []string
	// Start is the local wall-clock time it opens at, "HH:MM" from "00:00" to "23:59".
	Start string
	// Duration is how long it stays open, in time.ParseDuration's syntax ("6h", "90m"): more than zero and at
	// most MaxWindowDuration.
	Duration string
}

// Parse builds a Schedule from an UpgradeSchedule's fields: timezone is an IANA zone name ("" means UTC), and a
// blackout's End must be after its Start, both within the years 0001 to 9999 that RFC 3339 can write. It returns
// a *FieldError (matching ErrInvalid) naming the offending field ("windows[1].start") for the first value that is
// not valid, or if there are more than MaxWindows windows or MaxBlackouts blackouts.
func Parse(timezone string, windows []WindowSpec, blackouts []Blackout) (*Schedule, error) {
	loc, err := parseZone(timezone)
	if err != nil {
		return nil, err
	}
	s := &Schedule{loc: loc}
	if len(windows) > MaxWindows {
		return nil, invalid("windows", "at most %d are allowed, got %d", MaxWindows, len(windows))
	}
	for i, spec := range windows {
		w, days, err := parseWindow(spec, fmt.Sprintf("windows[%d]", i))
		if err != nil {
			return nil, err
		}
		for _, d := range days {
			s.byDay[d] = append(s.byDay[d], w)
		}
	}
	if len(blackouts) > MaxBlackouts {
		return nil, invalid("blackouts", "at most %d are allowed, got %d", MaxBlackouts, len(blackouts))
	}
	for i, b := range blackouts {
		if err := checkBlackout(b, fmt.Sprintf("blackouts[%d]", i)); err != nil {
			return nil, err
		}
	}
	s.blackouts = slices.Clone(blackouts)
	return s, nil
}

// FieldError is the error Parse returns: the offending field, as the API names it, and what is wrong with it. It
// matches ErrInvalid.
type FieldError struct {
	Field   string // "windows[1].start"
	Message string
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func parseZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		// time.LoadLocation would accept it, and the schedule would then mean something different on each host.
		return nil, invalid("timezone", `"Local" is not a time zone; name one such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("timezone", "unknown time zone %q", name)
	}
	return loc, nil
}

func parseWindow(spec WindowSpec, field string) (window, []time.Weekday, error) {
	if len(spec.Days) == 0 {
		return window{}, nil, invalid(field+".days", "at least one day is required")
	}
	var days []time.Weekday
	for i, name := range spec.Days {
		d, ok := parseDay(name)
		if !ok {
			return window{}, nil, invalid(fmt.Sprintf("%s.days[%d]", field, i),
				"unknown day %q, want one of Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday", name)
		}
		if slices.Contains(days, d) {
			return window{}, nil, invalid(fmt.Sprintf("%s.days[%d]", field, i), "%s is listed twice", name)
		}
		days = append(days, d)
	}
	start, ok := parseClock(spec.Start)
	if !ok {
		return window{}, nil, invalid(field+".start", "want HH:MM from 00:00 to 23:59, got %q", spec.Start)
	}
	d, err := time.ParseDuration(spec.Duration)
	switch {
	case err != nil:
		return window{}, nil, invalid(field+".duration", `want a duration such as "6h" or "90m", got %q`, spec.Duration)
	case d <= 0:
		return window{}, nil, invalid(field+".duration", "must be more than zero, got %q", spec.Duration)
	case d > MaxWindowDuration:
		return window{}, nil, invalid(field+".duration", "must be at most 168h, got %q", spec.Duration)
	}
	return window{start: start, duration: d}, days, nil
}

func parseDay(name string) (time.Weekday, bool) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if d.String() == name {
			return d, true
		}
	}
	return 0, false
}

// parseClock parses "HH:MM", exactly five characters, into the time since midnight.
func parseClock(s string) (time.Duration, bool) {
	hh, mm, ok := strings.Cut(s, ":")
	if !ok || len(hh) != 2 || len(mm) != 2 {
		return 0, false
	}
	h, okH := twoDigits(hh)
	m, okM := twoDigits(mm)
	if !okH || !okM || h > 23 || m > 59 {
		return 0, false
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, true
}

func twoDigits(s string) (int, bool) {
	if s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

func checkBlackout(b Blackout, field string) error {
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"start", b.Start}, {"end", b.End}} {
		if f.t.IsZero() {
			return invalid(field+"."+f.name, "is required")
		}
		// The years RFC 3339 can write; they also keep At's date arithmetic far from time.Time's limits.
		if y := f.t.UTC().Year(); y < 1 || y > 9999 {
			return invalid(field+"."+f.name, "must be within the years 0001 to 9999, got year %d", y)
		}
	}
	if !b.End.After(b.Start) {
		return invalid(field+".end", "must be after start (%s), got %s",
			b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339))
	}
	return nil
}
