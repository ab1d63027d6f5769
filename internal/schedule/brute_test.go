package schedule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The property test checks At against a brute force that shares none of its code: it watches a zone's wall
// clock tick minute by minute and opens each window the first time the clock reaches its start (or, for a start
// the clock jumps over, as far after the jump as the start is after the last reading before it), then marks a
// table of minutes open or closed. Every time here is a whole minute, and so are the zones' offsets, so a
// schedule's state is constant within each minute.

// bruteWindow is a window as the generator draws it, before it is spelled for Parse.
type bruteWindow struct {
	days     []time.Weekday
	start    time.Duration // since local midnight, whole minutes
	duration time.Duration // whole minutes
}

func (w bruteWindow) spec() WindowSpec {
	days := make([]string, len(w.days))
	for i, d := range w.days {
		days[i] = d.String()
	}
	start := fmt.Sprintf("%02d:%02d", int(w.start/time.Hour), int(w.start%time.Hour/time.Minute))
	return WindowSpec{Days: days, Start: start, Duration: w.duration.String()}
}

// wallMinute returns the reading of loc's clocks at t, as a UTC time.
func wallMinute(loc *time.Location, t time.Time) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
}

// bruteOpen returns, for each of the n minutes from base, whether the schedule is open in it.
func bruteOpen(loc *time.Location, windows []bruteWindow, blackouts []Blackout, base time.Time, n int) []bool {
	open := make([]bool, n)
	end := base.Add(time.Duration(n) * time.Minute)
	if len(windows) == 0 {
		for k := range open {
			open[k] = true
		}
	}

	// The wall-clock starts of every window around the range, by their Unix second written as UTC.
	scanFrom := base.Add(-9 * 24 * time.Hour)
	starts := map[int64][]time.Duration{}
	for day := wallMinute(loc, scanFrom).Truncate(24*time.Hour).AddDate(0, 0, -1); day.Before(end.AddDate(0, 0, 2)); day = day.AddDate(0, 0, 1) {
		for _, w := range windows {
			for _, d := range w.days {
				if d == day.Weekday() {
					starts[day.Add(w.start).Unix()] = append(starts[day.Add(w.start).Unix()], w.duration)
				}
			}
		}
	}

	// mark sets the minutes in [from, to) to v; both are whole minutes.
	mark := func(from, to time.Time, v bool) {
		for k := max(0, int(from.Sub(base)/time.Minute)); k < n && base.Add(time.Duration(k)*time.Minute).Before(to); k++ {
			open[k] = v
		}
	}
	prev := wallMinute(loc, scanFrom.Add(-time.Minute))
	highest := prev
	for i := scanFrom; i.Before(end); i = i.Add(time.Minute) {
		cur := wallMinute(loc, i)
		for w := highest.Add(time.Minute); !w.After(cur); w = w.Add(time.Minute) {
			at := i
			if w.Before(cur) {
				// The clock jumped over w: it opens as long after the jump as w is after the reading before.
				at = i.Add(w.Sub(prev) - time.Minute)
			}
			for _, d := range starts[w.Unix()] {
				mark(at, at.Add(d), true)
			}
		}
		if cur.After(highest) {
			highest = cur
		}
		prev = cur
	}
	for _, b := range blackouts {
		mark(b.Start, b.End, false)
	}
	return open
}

// zones for the property test: with and without daylight saving, clocks that move by half an hour (Lord Howe)
// and clocks that change at midnight, so that a day starts in the gap (Havana).
var propertyZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Havana",
}

// changes are days in 2026 on which some of propertyZones change their clocks.
var changes = []time.Time{
	time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 4, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
}

func randomWindow(r *rand.Rand) bruteWindow {
	var w bruteWindow
	perm := r.Perm(7)
	n := 1 + r.IntN(3)
	if r.IntN(8) == 0 {
		n = 7
	}
	for _, d := range perm[:n] {
		w.days = append(w.days, time.Weekday(d))
	}
	h := r.IntN(24)
	if r.IntN(2) == 0 {
		h = r.IntN(4) // around the hours clocks change in
	}
	m := 15 * r.IntN(4)
	if r.IntN(3) == 0 {
		m = r.IntN(60)
	}
	w.start = time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	switch r.IntN(8) {
	case 0:
		w.duration = MaxWindowDuration
	case 1:
		w.duration = time.Duration(1+r.IntN(7*24*60)) * time.Minute
	case 2, 3:
		w.duration = time.Duration(1+r.IntN(48*60)) * time.Minute
	default:
		w.duration = time.Duration(1+r.IntN(240)) * time.Minute
	}
	return w
}

func TestAtAgainstBruteForce(t *testing.T) {
	const (
		schedules = 120
		queries   = 30
		horizon   = 21 * 24 * 60 // minutes the brute force looks at
		queryIn   = 7 * 24 * 60  // minutes from base the queries fall in
	)
	r := rand.New(rand.NewPCG(20260329, 1))
	for i := range schedules {
		zone := propertyZones[r.IntN(len(propertyZones))]
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		// Mostly a few days before clocks change, so that the queries' week spans the change.
		base := changes[r.IntN(len(changes))].Add(-time.Duration(r.IntN(4*24*60)) * time.Minute)
		if r.IntN(4) == 0 {
			base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(730*24*60)) * time.Minute)
		}
		var windows []bruteWindow
		var specs []WindowSpec
		for range r.IntN(5) {
			w := randomWindow(r)
			windows, specs = append(windows, w), append(specs, w.spec())
		}
		var blackouts []Blackout
		for range max(0, r.IntN(6)-2) {
			start := base.Add(time.Duration(r.IntN(16*24*60)-2*24*60) * time.Minute)
			blackouts = append(blackouts, Blackout{Start: start, End: start.Add(time.Duration(1+r.IntN(2*24*60)) * time.Minute)})
		}

		name := fmt.Sprintf("%d %s %s %s", i, zone, base.Format(time.RFC3339), describe(specs, blackouts))
		t.Run(name, func(t *testing.T) {
			s, err := Parse(zone, specs, blackouts)
			require.NoError(t, err)
			open := bruteOpen(loc, windows, blackouts, base, horizon)
			minute := func(k int) time.Time { return base.Add(time.Duration(k) * time.Minute) }
			// firstFrom returns the first minute after k whose state is v, or -1 if none is in the horizon.
			firstFrom := func(k int, v bool) int {
				for j := k + 1; j < horizon; j++ {
					if open[j] == v {
						return j
					}
				}
				return -1
			}
			// Ask at random instants, and at every change of state in the first week and the minute before it.
			var ks []int
			for range queries {
				ks = append(ks, r.IntN(queryIn))
			}
			for k := 1; k < queryIn; k++ {
				if open[k] != open[k-1] {
					ks = append(ks, k-1, k)
				}
			}
			for _, k := range ks {
				at := minute(k)
				if r.IntN(2) == 0 {
					at = at.Add(time.Duration(r.Int64N(int64(time.Minute))))
				}
				got := s.At(at)
				require.Equal(t, open[k], got.Open, "open at %s", at)
				next, gotNext := firstFrom(k, !open[k]), got.NextOpen
				if got.Open {
					gotNext = got.Until
					require.True(t, got.NextOpen.IsZero(), "NextOpen while open at %s", at)
				} else {
					require.True(t, got.Until.IsZero(), "Until while closed at %s", at)
				}
				if next < 0 {
					require.True(t, gotNext.IsZero() || !gotNext.Before(minute(horizon)),
						"at %s: got a change at %s, the brute force sees none before %s", at, gotNext, minute(horizon))
					continue
				}
				require.True(t, minute(next).Equal(gotNext), "at %s (open %v): got a change at %s, want %s",
					at, open[k], gotNext, minute(next))
				require.Equal(t, loc, gotNext.Location())
			}
		})
	}
}

// describe spells a schedule out for a subtest's name, so that a failure can be replayed as a table case.
func describe(windows []WindowSpec, blackouts []Blackout) string {
	var parts []string
	for _, w := range windows {
		parts = append(parts, fmt.Sprintf("%s@%s+%s", strings.Join(w.Days, ","), w.Start, w.Duration))
	}
	for _, b := range blackouts {
		parts = append(parts, fmt.Sprintf("blackout[%s,%s)", b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339)))
	}
	return strings.Join(parts, " ")
}
