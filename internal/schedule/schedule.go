package schedule

import (
	"slices"
	"time"
)

// Limits of a schedule; the API's UpgradeSchedule has the same ones.
const (
	MaxWindows        = 32
	MaxBlackouts      = 64
	MaxWindowDuration = 7 * 24 * time.Hour
)

const (
	// untilHorizon bounds the search for the end of an open period. It is over a year, so that windows which tile
	// the week by the clock still show the gap that falling back leaves in them, whenever in the year t is.
	untilHorizon = 400 * 24 * time.Hour
	// maxOffset is more than any UTC offset a time zone has ever had (tzdata's lie within ±16h).
	maxOffset = 48 * time.Hour
	// lookBehind is how many local days before t's can hold the start of a window still open at t: a window lasts
	// at most a week of elapsed time, and a local week may be a day shorter than that (Samoa skipped a day).
	lookBehind = 8
	// lookAhead is how many local days after t's to read so that every window has a start after t: a week, plus
	// one day for the same reason.
	lookAhead = 8
)

// Blackout is a range of instants [Start, End) in which nothing may roll, even inside a window.
type Blackout struct {
	Start, End time.Time
}

// Schedule is a valid upgrade schedule, built by Parse. A nil or zero Schedule has no windows and no blackouts,
// so it is always open.
type Schedule struct {
	loc *time.Location
	// byDay holds the windows that open on each weekday, indexed by time.Weekday.
	byDay     [7][]window
	blackouts []Blackout
}

// window is one weekly window on one of its days.
type window struct {
	start    time.Duration // since local midnight
	duration time.Duration
}

// span is one window's opening: the instants [start, end).
type span struct {
	start, end time.Time
}

// State is what At reports. Its times are in the schedule's time zone.
type State struct {
	// Open says whether the schedule is open at the instant asked about.
	Open bool
	// Until is set when Open: the instant the open period ends, that is the end of the (merged) window or the
	// start of the next blackout, whichever comes first. It is zero if the period lasts at least 400 days.
	Until time.Time
	// NextOpen is set when not Open: the earliest later instant at which the schedule is open.
	NextOpen time.Time
}

// At reports whether s is open at t and when that changes: Until if it is open, NextOpen if it is closed.
func (s *Schedule) At(t time.Time) State {
	if s == nil {
		return State{Open: true}
	}
	next := s.nextOpen(t)
	if next.After(t) {
		return State{NextOpen: next.In(s.location())}
	}
	return State{Open: true, Until: s.until(t)}
}

func (s *Schedule) location() *time.Location {
	if s.loc == nil {
		return time.UTC
	}
	return s.loc
}

func (s *Schedule) hasWindows() bool {
	for _, ws := range s.byDay {
		if len(ws) > 0 {
			return true
		}
	}
	return false
}

// nextOpen returns the earliest instant ≥ t at which s is open. Each turn of the loop either returns or moves
// past the end of one more blackout, so it ends after at most len(s.blackouts)+1 turns; overlapping blackouts
// need no merging, as the turn after one ends finds the next.
func (s *Schedule) nextOpen(t time.Time) time.Time {
	c := t
	for {
		w := c
		if s.hasWindows() {
			w = s.nextInWindow(c)
		}
		b, ok := s.blackoutAt(w)
		if !ok {
			return w
		}
		c = b.End
	}
}

// until returns when the open period that holds t ends, or zero if it lasts at least untilHorizon.
func (s *Schedule) until(t time.Time) time.Time {
	limit, blackout := t.Add(untilHorizon), false
	if start, ok := s.nextBlackoutStart(t); ok {
		limit, blackout = start, true
	}
	end := limit
	if s.hasWindows() {
		end = s.windowEnd(t, limit)
	}
	if !blackout && !end.Before(limit) {
		return time.Time{}
	}
	return end.In(s.location())
}

// blackoutAt returns the blackout that holds t, if any.
func (s *Schedule) blackoutAt(t time.Time) (Blackout, bool) {
	for _, b := range s.blackouts {
		if !t.Before(b.Start) && t.Before(b.End) {
			return b, true
		}
	}
	return Blackout{}, false
}

// nextBlackoutStart returns the earliest start of a blackout after t, if any.
func (s *Schedule) nextBlackoutStart(t time.Time) (time.Time, bool) {
	var next time.Time
	for _, b := range s.blackouts {
		if b.Start.After(t) && (next.IsZero() || b.Start.Before(next)) {
			next = b.Start
		}
	}
	return next, !next.IsZero()
}

// nextInWindow returns the earliest instant ≥ c inside some window: c itself if a window holds it, else the
// next window start. s must have windows; lookBehind and lookAhead then guarantee an answer on the first pass,
// and the loop only widens the range should that reasoning ever be wrong.
func (s *Schedule) nextInWindow(c time.Time) time.Time {
	first := s.localDay(c).AddDate(0, 0, -lookBehind)
	for days := lookBehind + 1 + lookAhead; ; days *= 2 {
		for _, o := range s.spans(first, days) {
			if o.start.After(c) {
				// Spans are sorted by start, so none after this one holds c or starts earlier.
				return o.start
			}
			if c.Before(o.end) {
				return c
			}
		}
	}
}

// windowEnd returns the end of the merged windows that hold from, or limit if they last until limit or later.
func (s *Schedule) windowEnd(from, limit time.Time) time.Time {
	first := s.localDay(from).AddDate(0, 0, -lookBehind)
	for days := lookBehind + 1 + lookAhead; ; days *= 2 {
		end := from
		for _, o := range s.spans(first, days) {
			if o.start.After(end) {
				break
			}
			if o.end.After(end) {
				end = o.end
			}
		}
		if !end.Before(limit) {
			return limit
		}
		// A window on a day not read yet starts at or after that day's local midnight, read with some UTC
		// offset; so none starts before frontier, and none can extend end if end is before it.
		frontier := first.AddDate(0, 0, days).Add(-maxOffset)
		if end.Before(frontier) {
			return end
		}
	}
}

// localDay returns t's date in s's zone, as midnight UTC (so that AddDate counts calendar days).
func (s *Schedule) localDay(t time.Time) time.Time {
	y, m, d := t.In(s.location()).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// spans returns the openings of the windows on the local days [first, first+days), first given as by localDay,
// sorted by start. They are sorted rather than generated in order because a start that the clocks skip moves
// forward past later wall-clock times.
func (s *Schedule) spans(first time.Time, days int) []span {
	var out []span
	for i := range days {
		day := first.AddDate(0, 0, i)
		for _, w := range s.byDay[day.Weekday()] {
			start := wallInstant(s.location(), day.Add(w.start))
			out = append(out, span{start: start, end: start.Add(w.duration)})
		}
	}
	slices.SortFunc(out, func(a, b span) int { return a.start.Compare(b.start) })
	return out
}

// wallInstant returns the instant at which the clocks in loc read wall, a wall-clock reading written as a UTC
// time: the first one if they read it twice (falling back), and if they skip it (springing forward) the instant
// it names in the offset in force before the skip, so wall moved forward by the gap. time.Date does neither
// reliably: which reading it picks depends on the sign of the zone's offset.
func wallInstant(loc *time.Location, wall time.Time) time.Time {
	// Walk the zone's periods from one that surely starts before the answer. at, wall read with the period's
	// offset, never falls before the period's start: at first because |offset| < maxOffset, later because of
	// the check at the bottom of the loop.
	p := wall.Add(-maxOffset).In(loc)
	_, off := p.Zone()
	for {
		at := wall.Add(-time.Duration(off) * time.Second)
		_, end := p.ZoneBounds()
		if end.IsZero() || at.Before(end) {
			return at
		}
		p = end.In(loc)
		_, next := p.Zone()
		if wall.Add(-time.Duration(next) * time.Second).Before(end) {
			// Read with either offset, wall lands on the other side of the change: the clocks skip it.
			return at
		}
		off = next
	}
}
