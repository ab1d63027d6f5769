package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// spec is an UpgradeSchedule as a test writes it; blackouts are [start, end) pairs in RFC 3339.
type spec struct {
	tz        string
	windows   []WindowSpec
	blackouts [][2]string
}

func win(start, duration string, days ...string) WindowSpec {
	return WindowSpec{Days: days, Start: start, Duration: duration}
}

var everyDay = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// weekendNights is the schedule the tables lean on: Saturday and Sunday 22:00 for 6h, in tz.
func weekendNights(tz string, blackouts ...[2]string) spec {
	return spec{tz: tz, windows: []WindowSpec{win("22:00", "6h", "Saturday", "Sunday")}, blackouts: blackouts}
}

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(tb, err)
	return t
}

func mustParse(tb testing.TB, sp spec) *Schedule {
	tb.Helper()
	var bs []Blackout
	for _, b := range sp.blackouts {
		bs = append(bs, Blackout{Start: mustTime(tb, b[0]), End: mustTime(tb, b[1])})
	}
	s, err := Parse(sp.tz, sp.windows, bs)
	require.NoError(tb, err)
	return s
}

// view is a State with its times written in RFC 3339 ("" for zero), so that a test also sees their zone.
type view struct {
	Open     bool
	Until    string
	NextOpen string
}

func viewOf(st State) view {
	format := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Format(time.RFC3339Nano)
	}
	return view{Open: st.Open, Until: format(st.Until), NextOpen: format(st.NextOpen)}
}

func openUntil(until string) view { return view{Open: true, Until: until} }
func opensAt(next string) view    { return view{NextOpen: next} }

var openEnded = view{Open: true}

type atCase struct {
	name string
	spec spec
	at   string
	want view
}

func runAt(t *testing.T, tests []atCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := viewOf(mustParse(t, tt.spec).At(mustTime(t, tt.at)))
			require.Equal(t, tt.want, got)
		})
	}
}

// 2026-06-05 is a Friday; 2026-06-06 and 07 are a weekend.
func TestAtWindows(t *testing.T) {
	runAt(t, []atCase{
		{"closed before the week's first window", weekendNights(""), "2026-06-05T12:00:00Z",
			opensAt("2026-06-06T22:00:00Z")},
		{"open exactly at a window's start", weekendNights(""), "2026-06-06T22:00:00Z",
			openUntil("2026-06-07T04:00:00Z")},
		{"open past midnight", weekendNights(""), "2026-06-07T01:00:00Z", openUntil("2026-06-07T04:00:00Z")},
		{"open a nanosecond before the end", weekendNights(""), "2026-06-07T03:59:59.999999999Z",
			openUntil("2026-06-07T04:00:00Z")},
		{"closed exactly at a window's end", weekendNights(""), "2026-06-07T04:00:00Z",
			opensAt("2026-06-07T22:00:00Z")},
		{"open on Monday in Sunday's window, across the week's end", weekendNights(""), "2026-06-08T02:00:00Z",
			openUntil("2026-06-08T04:00:00Z")},
		{"closed after the week's last window, opens next Saturday", weekendNights(""), "2026-06-08T04:00:00Z",
			opensAt("2026-06-13T22:00:00Z")},
		{"UTC by default, whatever t's zone", weekendNights(""), "2026-06-06T23:30:00+01:00",
			openUntil("2026-06-07T04:00:00Z")},
		{"in the schedule's zone, across the week's end", weekendNights("Europe/Berlin"),
			"2026-06-08T02:00:00+02:00", openUntil("2026-06-08T04:00:00+02:00")},
		{"the schedule's zone, not UTC, sets the start", weekendNights("Europe/Berlin"), "2026-06-06T21:00:00Z",
			openUntil("2026-06-07T04:00:00+02:00")},
		{"a 168h window in UTC is always open",
			spec{windows: []WindowSpec{win("06:00", "168h", "Monday")}}, "2026-06-03T12:00:00Z", openEnded},
		{"a window every day for 24h in UTC is always open",
			spec{windows: []WindowSpec{win("00:00", "24h", everyDay...)}}, "2026-06-03T12:00:00Z", openEnded},
		{"overlapping windows merge", spec{windows: []WindowSpec{
			win("10:00", "2h", "Monday"), win("11:00", "2h", "Monday"), win("13:00", "1h", "Monday"),
			win("15:00", "1h", "Monday"),
		}}, "2026-06-01T10:30:00Z", openUntil("2026-06-01T14:00:00Z")},
		{"a touching window continues the period", spec{windows: []WindowSpec{
			win("10:00", "2h", "Monday"), win("11:00", "2h", "Monday"), win("13:00", "1h", "Monday"),
			win("15:00", "1h", "Monday"),
		}}, "2026-06-01T13:00:00Z", openUntil("2026-06-01T14:00:00Z")},
		{"closed in the gap between merged windows", spec{windows: []WindowSpec{
			win("10:00", "2h", "Monday"), win("11:00", "2h", "Monday"), win("13:00", "1h", "Monday"),
			win("15:00", "1h", "Monday"),
		}}, "2026-06-01T14:00:00Z", opensAt("2026-06-01T15:00:00Z")},
		{"a window inside another does not end it", spec{windows: []WindowSpec{
			win("10:00", "8h", "Monday"), win("11:00", "1h", "Monday"),
		}}, "2026-06-01T11:30:00Z", openUntil("2026-06-01T18:00:00Z")},
		{"a later day's window extends an earlier day's", spec{windows: []WindowSpec{
			win("20:00", "30h", "Sunday"), win("23:00", "3h", "Monday"),
		}}, "2026-05-31T21:00:00Z", openUntil("2026-06-02T02:00:00Z")},
		{"a window listed before an earlier one", spec{windows: []WindowSpec{
			win("18:00", "1h", "Friday"), win("09:00", "1h", "Wednesday", "Friday"),
		}}, "2026-06-03T10:00:00Z", opensAt("2026-06-05T09:00:00Z")},
		{"leap day", spec{windows: []WindowSpec{win("23:00", "2h", "Tuesday")}}, "2028-02-28T12:00:00Z",
			opensAt("2028-02-29T23:00:00Z")},
		{"from the leap day into March", spec{windows: []WindowSpec{win("23:00", "2h", "Tuesday")}},
			"2028-02-29T23:30:00Z", openUntil("2028-03-01T01:00:00Z")},
		{"across the year's end", spec{windows: []WindowSpec{win("23:00", "3h", "Thursday")}},
			"2026-12-31T23:30:00Z", openUntil("2027-01-01T02:00:00Z")},
		{"across the year's end in the schedule's zone",
			spec{tz: "Europe/Berlin", windows: []WindowSpec{win("23:00", "3h", "Thursday")}},
			"2026-12-31T23:30:00Z", openUntil("2027-01-01T02:00:00+01:00")},
		{"before the year's last window", spec{windows: []WindowSpec{win("23:00", "3h", "Thursday")}},
			"2026-12-30T00:00:00Z", opensAt("2026-12-31T23:00:00Z")},
	})
}

func TestAtBlackouts(t *testing.T) {
	yearEnd := [2]string{"2026-12-20T00:00:00Z", "2027-01-05T00:00:00Z"}
	runAt(t, []atCase{
		{"a blackout covering the next window skips to the one after",
			weekendNights("", [2]string{"2026-06-06T21:00:00Z", "2026-06-07T05:00:00Z"}),
			"2026-06-05T12:00:00Z", opensAt("2026-06-07T22:00:00Z")},
		{"blackouts covering several windows skip them all", weekendNights("",
			[2]string{"2026-06-06T22:00:00Z", "2026-06-07T04:00:00Z"},
			[2]string{"2026-06-07T21:00:00Z", "2026-06-08T04:00:00Z"},
			[2]string{"2026-06-13T12:00:00Z", "2026-06-14T12:00:00Z"}),
			"2026-06-05T12:00:00Z", opensAt("2026-06-14T22:00:00Z")},
		{"a blackout ending inside a window opens it at the blackout's end",
			weekendNights("", [2]string{"2026-06-06T20:00:00Z", "2026-06-07T01:00:00Z"}),
			"2026-06-05T12:00:00Z", opensAt("2026-06-07T01:00:00Z")},
		{"closed inside a blackout inside a window",
			weekendNights("", [2]string{"2026-06-06T20:00:00Z", "2026-06-07T01:00:00Z"}),
			"2026-06-06T23:00:00Z", opensAt("2026-06-07T01:00:00Z")},
		{"open exactly at a blackout's end",
			weekendNights("", [2]string{"2026-06-06T20:00:00Z", "2026-06-07T01:00:00Z"}),
			"2026-06-07T01:00:00Z", openUntil("2026-06-07T04:00:00Z")},
		{"a blackout starting inside the window ends the open period",
			weekendNights("", [2]string{"2026-06-07T02:00:00Z", "2026-06-07T02:30:00Z"}),
			"2026-06-06T23:00:00Z", openUntil("2026-06-07T02:00:00Z")},
		{"closed exactly at a blackout's start",
			weekendNights("", [2]string{"2026-06-06T22:00:00Z", "2026-06-06T23:00:00Z"}),
			"2026-06-06T22:00:00Z", opensAt("2026-06-06T23:00:00Z")},
		{"a blackout after the window does not shorten it",
			weekendNights("", [2]string{"2026-06-07T04:00:00Z", "2026-06-07T05:00:00Z"}),
			"2026-06-06T23:00:00Z", openUntil("2026-06-07T04:00:00Z")},
		{"overlapping and touching blackouts merge", weekendNights("",
			[2]string{"2026-06-07T02:00:00Z", "2026-06-07T03:00:00Z"},
			[2]string{"2026-06-06T20:00:00Z", "2026-06-07T00:00:00Z"},
			[2]string{"2026-06-06T23:00:00Z", "2026-06-07T02:00:00Z"}),
			"2026-06-06T21:00:00Z", opensAt("2026-06-07T03:00:00Z")},
		{"inside the second of merged blackouts", weekendNights("",
			[2]string{"2026-06-07T02:00:00Z", "2026-06-07T03:00:00Z"},
			[2]string{"2026-06-06T20:00:00Z", "2026-06-07T00:00:00Z"},
			[2]string{"2026-06-06T23:00:00Z", "2026-06-07T02:00:00Z"}),
			"2026-06-07T00:30:00Z", opensAt("2026-06-07T03:00:00Z")},
		{"the year-end freeze ends the last window before it", weekendNights("", yearEnd),
			"2026-12-19T23:00:00Z", openUntil("2026-12-20T00:00:00Z")},
		{"after the year-end freeze, the first weekend", weekendNights("", yearEnd), "2026-12-21T09:00:00Z",
			opensAt("2027-01-09T22:00:00Z")},
		{"a blackout ends an always-open window",
			spec{windows: []WindowSpec{win("06:00", "168h", "Monday")},
				blackouts: [][2]string{{"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"}}},
			"2026-06-03T12:00:00Z", openUntil("2026-06-10T00:00:00Z")},
		{"an always-open window reopens at a blackout's end",
			spec{windows: []WindowSpec{win("06:00", "168h", "Monday")},
				blackouts: [][2]string{{"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"}}},
			"2026-06-10T12:00:00Z", opensAt("2026-06-11T00:00:00Z")},
		{"no windows and no blackouts: always open", spec{}, "2026-06-05T12:00:00Z", openEnded},
		{"no windows: open until the next blackout",
			spec{blackouts: [][2]string{{"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"}}},
			"2026-06-05T12:00:00Z", openUntil("2026-06-10T00:00:00Z")},
		{"no windows: closed at a blackout's start",
			spec{blackouts: [][2]string{{"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"}}},
			"2026-06-10T00:00:00Z", opensAt("2026-06-11T00:00:00Z")},
		{"no windows: open for good at the last blackout's end",
			spec{blackouts: [][2]string{{"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"}}},
			"2026-06-11T00:00:00Z", openEnded},
		{"no windows: open until the earliest blackout after",
			spec{blackouts: [][2]string{
				{"2026-06-20T00:00:00Z", "2026-06-21T00:00:00Z"}, {"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"},
				{"2026-06-15T00:00:00Z", "2026-06-16T00:00:00Z"},
			}},
			"2026-06-11T00:00:00Z", openUntil("2026-06-15T00:00:00Z")},
		{"no windows: times in the schedule's zone",
			spec{tz: "America/New_York", blackouts: [][2]string{{"2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z"}}},
			"2026-06-10T12:00:00Z", opensAt("2026-06-10T20:00:00-04:00")},
	})
}

// Clocks change on 2026-03-29 (02:00 CET → 03:00 CEST) and 2026-10-25 (03:00 CEST → 02:00 CET) in Berlin, and on
// 2026-03-08 (02:00 EST → 03:00 EDT) and 2026-11-01 (02:00 EDT → 01:00 EST) in New York; all are Sundays.
func TestAtDaylightSaving(t *testing.T) {
	berlin := func(ws ...WindowSpec) spec { return spec{tz: "Europe/Berlin", windows: ws} }
	newYork := func(ws ...WindowSpec) spec { return spec{tz: "America/New_York", windows: ws} }
	runAt(t, []atCase{
		{"Berlin: a start the clocks skip moves forward by the gap", berlin(win("02:30", "1h", "Sunday")),
			"2026-03-29T01:59:00+01:00", opensAt("2026-03-29T03:30:00+02:00")},
		{"Berlin: open from the moved start for the whole duration", berlin(win("02:30", "1h", "Sunday")),
			"2026-03-29T03:30:00+02:00", openUntil("2026-03-29T04:30:00+02:00")},
		{"Berlin: a start at the gap's beginning opens as it ends", berlin(win("02:00", "1h", "Sunday")),
			"2026-03-29T00:00:00+01:00", opensAt("2026-03-29T03:00:00+02:00")},
		{"Berlin: a start after the change is at its wall-clock time", berlin(win("10:00", "1h", "Sunday")),
			"2026-03-29T00:00:00+01:00", opensAt("2026-03-29T10:00:00+02:00")},
		{"Berlin: and so on the day the clocks go back", berlin(win("10:00", "1h", "Sunday")),
			"2026-10-25T00:00:00+02:00", opensAt("2026-10-25T10:00:00+01:00")},
		{"Berlin: the skipped start is back the week after", berlin(win("02:30", "1h", "Sunday")),
			"2026-03-29T04:30:00+02:00", opensAt("2026-04-05T02:30:00+02:00")},
		{"Berlin: a start the clocks read twice opens at the first reading", berlin(win("02:30", "30m", "Sunday")),
			"2026-10-25T00:00:00+02:00", opensAt("2026-10-25T02:30:00+02:00")},
		{"Berlin: its duration is elapsed time, ending at 02:00 on the second reading",
			berlin(win("02:30", "30m", "Sunday")),
			"2026-10-25T02:45:00+02:00", openUntil("2026-10-25T02:00:00+01:00")},
		{"Berlin: not open again at the second reading", berlin(win("02:30", "30m", "Sunday")),
			"2026-10-25T02:45:00+01:00", opensAt("2026-11-01T02:30:00+01:00")},
		{"Berlin: 8h across springing forward ends at 07:00", berlin(win("22:00", "8h", "Saturday")),
			"2026-03-28T23:00:00+01:00", openUntil("2026-03-29T07:00:00+02:00")},
		{"Berlin: 8h across falling back ends at 05:00", berlin(win("22:00", "8h", "Saturday")),
			"2026-10-24T23:00:00+02:00", openUntil("2026-10-25T05:00:00+01:00")},
		{"Berlin: 24h every day leaves an hour's gap when the clocks go back", berlin(win("00:00", "24h", everyDay...)),
			"2026-10-25T12:00:00+01:00", openUntil("2026-10-25T23:00:00+01:00")},
		{"Berlin: closed in that gap", berlin(win("00:00", "24h", everyDay...)),
			"2026-10-25T23:30:00+01:00", opensAt("2026-10-26T00:00:00+01:00")},
		{"Berlin: a 168h week is an hour short of the week the clocks go back", berlin(win("06:00", "168h", "Monday")),
			"2026-10-20T12:00:00+02:00", openUntil("2026-10-26T05:00:00+01:00")},
		{"Berlin: closed in the 168h window's gap", berlin(win("06:00", "168h", "Monday")),
			"2026-10-26T05:30:00+01:00", opensAt("2026-10-26T06:00:00+01:00")},
		{"Berlin: a 168h week overlaps the next when the clocks go forward, open until October",
			berlin(win("06:00", "168h", "Monday")),
			"2026-03-25T12:00:00+01:00", openUntil("2026-10-26T05:00:00+01:00")},
		{"New York: a start the clocks skip moves forward by the gap", newYork(win("02:30", "1h", "Sunday")),
			"2026-03-08T01:00:00-05:00", opensAt("2026-03-08T03:30:00-04:00")},
		{"New York: open from the moved start", newYork(win("02:30", "1h", "Sunday")),
			"2026-03-08T03:30:00-04:00", openUntil("2026-03-08T04:30:00-04:00")},
		{"New York: closed at 01:30 EST, where time.Date would put the start", newYork(win("02:30", "1h", "Sunday")),
			"2026-03-08T01:30:00-05:00", opensAt("2026-03-08T03:30:00-04:00")},
		{"New York: a start the clocks read twice opens at the first reading", newYork(win("01:30", "1h", "Sunday")),
			"2026-11-01T00:00:00-04:00", opensAt("2026-11-01T01:30:00-04:00")},
		{"New York: open an elapsed hour, to the second reading", newYork(win("01:30", "1h", "Sunday")),
			"2026-11-01T01:45:00-04:00", openUntil("2026-11-01T01:30:00-05:00")},
		{"New York: not open again at the second reading", newYork(win("01:30", "1h", "Sunday")),
			"2026-11-01T01:45:00-05:00", opensAt("2026-11-08T01:30:00-05:00")},
		{"New York: 4h across springing forward ends at 04:00", newYork(win("23:00", "4h", "Saturday")),
			"2026-03-07T23:30:00-05:00", openUntil("2026-03-08T04:00:00-04:00")},
		{"New York: 4h across falling back ends at 02:00", newYork(win("23:00", "4h", "Saturday")),
			"2026-10-31T23:30:00-04:00", openUntil("2026-11-01T02:00:00-05:00")},
	})
}

func TestAtNilSchedule(t *testing.T) {
	var s *Schedule
	require.Equal(t, openEnded, viewOf(s.At(time.Date(2026, 6, 5, 12, 0, 0, 0, time.UTC))))
	require.Equal(t, openEnded, viewOf((&Schedule{}).At(time.Date(2026, 6, 5, 12, 0, 0, 0, time.UTC))))
}

// wallInstant is where the DST rules live; these pin it down directly, including a zone whose clocks move by
// half an hour and one that skipped a whole day.
func TestWallInstant(t *testing.T) {
	tests := []struct {
		zone string
		wall string // a wall-clock reading, written as UTC
		want string
	}{
		{"UTC", "2026-06-05T12:00:00Z", "2026-06-05T12:00:00Z"},
		{"Europe/Berlin", "2026-03-29T01:59:00Z", "2026-03-29T01:59:00+01:00"},
		{"Europe/Berlin", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00+02:00"},
		{"Europe/Berlin", "2026-03-29T02:59:00Z", "2026-03-29T03:59:00+02:00"},
		{"Europe/Berlin", "2026-03-29T03:00:00Z", "2026-03-29T03:00:00+02:00"},
		{"Europe/Berlin", "2026-10-25T02:00:00Z", "2026-10-25T02:00:00+02:00"},
		{"Europe/Berlin", "2026-10-25T02:59:00Z", "2026-10-25T02:59:00+02:00"},
		{"Europe/Berlin", "2026-10-25T03:00:00Z", "2026-10-25T03:00:00+01:00"},
		{"America/New_York", "2026-03-08T02:00:00Z", "2026-03-08T03:00:00-04:00"},
		{"America/New_York", "2026-03-08T02:30:00Z", "2026-03-08T03:30:00-04:00"},
		{"America/New_York", "2026-11-01T01:00:00Z", "2026-11-01T01:00:00-04:00"},
		{"America/New_York", "2026-11-01T02:00:00Z", "2026-11-01T02:00:00-05:00"},
		// Lord Howe Island moves its clocks by 30 minutes at 02:00.
		{"Australia/Lord_Howe", "2026-10-04T02:15:00Z", "2026-10-04T02:45:00+11:00"},
		{"Australia/Lord_Howe", "2026-04-05T01:45:00Z", "2026-04-05T01:45:00+11:00"},
		// Samoa skipped 2011-12-30, going from UTC−10 to UTC+14 at midnight.
		{"Pacific/Apia", "2011-12-30T09:00:00Z", "2011-12-31T09:00:00+14:00"},
		{"Pacific/Apia", "2011-12-29T23:59:00Z", "2011-12-29T23:59:00-10:00"},
		// Far beyond tzdata's listed transitions, where Go applies the zone's rule.
		{"Europe/Berlin", "2087-03-30T02:30:00Z", "2087-03-30T03:30:00+02:00"},
	}
	for _, tt := range tests {
		t.Run(tt.zone+" "+tt.wall, func(t *testing.T) {
			loc, err := time.LoadLocation(tt.zone)
			require.NoError(t, err)
			got := wallInstant(loc, mustTime(t, tt.wall)).In(loc).Format(time.RFC3339)
			require.Equal(t, tt.want, got)
		})
	}
}

// BenchmarkAt measures At on a typical schedule and on the costliest ones: an open period that runs for months
// (Until must look ahead until it ends) and a run of blackouts that each cover the next window.
func BenchmarkAt(b *testing.B) {
	var covering [][2]string
	for i := range MaxBlackouts {
		sat := time.Date(2026, 6, 6, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 7*i)
		covering = append(covering, [2]string{sat.Format(time.RFC3339), sat.AddDate(0, 0, 3).Format(time.RFC3339)})
	}
	benchmarks := []struct {
		name string
		spec spec
		at   string
	}{
		{"weekend nights, closed", weekendNights("Europe/Berlin"), "2026-06-03T12:00:00Z"},
		{"weekend nights, open", weekendNights("Europe/Berlin"), "2026-06-06T23:00:00Z"},
		{"open for months", spec{tz: "Europe/Berlin", windows: []WindowSpec{win("06:00", "168h", "Monday")}},
			"2026-03-25T12:00:00Z"},
		{"open for good", spec{windows: []WindowSpec{win("00:00", "24h", everyDay...)}}, "2026-03-25T12:00:00Z"},
		{"64 blackouts to skip", weekendNights("Europe/Berlin", covering...), "2026-06-03T12:00:00Z"},
	}
	for _, bb := range benchmarks {
		b.Run(bb.name, func(b *testing.B) {
			s, at := mustParse(b, bb.spec), mustTime(b, bb.at)
			for b.Loop() {
				s.At(at)
			}
		})
	}
}
