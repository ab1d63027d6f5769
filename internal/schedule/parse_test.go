package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func windowsOf(n int) []WindowSpec {
	ws := make([]WindowSpec, n)
	for i := range ws {
		ws[i] = win(fmt.Sprintf("%02d:00", i%24), "1h", "Monday")
	}
	return ws
}

func blackoutsOf(n int) []Blackout {
	bs := make([]Blackout, n)
	for i := range bs {
		start := time.Date(2026, 1, 1+2*i, 0, 0, 0, 0, time.UTC)
		bs[i] = Blackout{Start: start, End: start.Add(time.Hour)}
	}
	return bs
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name      string
		tz        string
		windows   []WindowSpec
		blackouts []Blackout
	}{
		{name: "nothing at all"},
		{name: "the API's example", tz: "Europe/Berlin", windows: []WindowSpec{win("22:00", "6h", "Saturday", "Sunday")},
			blackouts: []Blackout{{
				Start: time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC), End: time.Date(2027, 1, 5, 0, 0, 0, 0, time.UTC),
			}}},
		{name: "UTC by name", tz: "UTC"},
		{name: "every day, from midnight", windows: []WindowSpec{win("00:00", "24h", everyDay...)}},
		{name: "the last minute of the day", windows: []WindowSpec{win("23:59", "1m", "Friday")}},
		{name: "a week long", windows: []WindowSpec{win("06:00", "168h", "Monday")}},
		{name: "a nanosecond long", windows: []WindowSpec{win("06:00", "1ns", "Monday")}},
		{name: "an odd duration", windows: []WindowSpec{win("06:00", "1h30m15s", "Monday")}},
		{name: "as many windows as allowed", windows: windowsOf(MaxWindows)},
		{name: "as many blackouts as allowed", blackouts: blackoutsOf(MaxBlackouts)},
		{name: "a blackout of a nanosecond", blackouts: []Blackout{{
			Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC),
		}}},
		{name: "the years RFC 3339 can write", blackouts: []Blackout{{
			Start: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), End: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.tz, tt.windows, tt.blackouts)
			require.NoError(t, err)
			require.NotNil(t, s)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	jan := func(day, hour int) time.Time { return time.Date(2026, 1, day, hour, 0, 0, 0, time.UTC) }
	ok := win("22:00", "6h", "Saturday")
	tests := []struct {
		name      string
		tz        string
		windows   []WindowSpec
		blackouts []Blackout
		want      string
	}{
		{name: "unknown time zone", tz: "Europe/Berln",
			want: `timezone: unknown time zone "Europe/Berln"`},
		{name: "a path, not a zone", tz: "../etc/passwd",
			want: `timezone: unknown time zone "../etc/passwd"`},
		{name: "the host's zone", tz: "Local",
			want: `timezone: "Local" is not a time zone; name one such as "Europe/Berlin"`},
		{name: "too many windows", windows: windowsOf(MaxWindows + 1),
			want: "windows: at most 32 are allowed, got 33"},
		{name: "no days", windows: []WindowSpec{ok, win("22:00", "6h")},
			want: "windows[1].days: at least one day is required"},
		{name: "an abbreviated day", windows: []WindowSpec{win("22:00", "6h", "Friday", "Sat")},
			want: `windows[0].days[1]: unknown day "Sat", want one of Sunday, Monday, Tuesday, Wednesday, Thursday, ` +
				`Friday, Saturday`},
		{name: "a day in lower case", windows: []WindowSpec{win("22:00", "6h", "saturday")},
			want: `windows[0].days[0]: unknown day "saturday", want one of Sunday, Monday, Tuesday, Wednesday, ` +
				`Thursday, Friday, Saturday`},
		{name: "a day twice", windows: []WindowSpec{win("22:00", "6h", "Monday", "Friday", "Monday")},
			want: "windows[0].days[2]: Monday is listed twice"},
		{name: "an hour past the day", windows: []WindowSpec{ok, ok, win("24:00", "6h", "Monday")},
			want: `windows[2].start: want HH:MM from 00:00 to 23:59, got "24:00"`},
		{name: "a minute past the hour", windows: []WindowSpec{win("07:60", "6h", "Monday")},
			want: `windows[0].start: want HH:MM from 00:00 to 23:59, got "07:60"`},
		{name: "one digit for the hour", windows: []WindowSpec{win("7:00", "6h", "Monday")},
			want: `windows[0].start: want HH:MM from 00:00 to 23:59, got "7:00"`},
		{name: "seconds", windows: []WindowSpec{win("07:00:00", "6h", "Monday")},
			want: `windows[0].start: want HH:MM from 00:00 to 23:59, got "07:00:00"`},
		{name: "not digits", windows: []WindowSpec{win("ab:cd", "6h", "Monday")},
			want: `windows[0].start: want HH:MM from 00:00 to 23:59, got "ab:cd"`},
		{name: "a signed hour", windows: []WindowSpec{win("+7:00", "6h", "Monday")},
			want: `windows[0].start: want HH:MM from 00:00 to 23:59, got "+7:00"`},
		{name: "no start", windows: []WindowSpec{win("", "6h", "Monday")},
			want: `windows[0].start: want HH:MM from 00:00 to 23:59, got ""`},
		{name: "a duration in words", windows: []WindowSpec{win("22:00", "6 hours", "Monday")},
			want: `windows[0].duration: want a duration such as "6h" or "90m", got "6 hours"`},
		{name: "days as a duration", windows: []WindowSpec{win("22:00", "1d", "Monday")},
			want: `windows[0].duration: want a duration such as "6h" or "90m", got "1d"`},
		{name: "no duration", windows: []WindowSpec{win("22:00", "", "Monday")},
			want: `windows[0].duration: want a duration such as "6h" or "90m", got ""`},
		{name: "a zero duration", windows: []WindowSpec{win("22:00", "0s", "Monday")},
			want: `windows[0].duration: must be more than zero, got "0s"`},
		{name: "a negative duration", windows: []WindowSpec{win("22:00", "-1h", "Monday")},
			want: `windows[0].duration: must be more than zero, got "-1h"`},
		{name: "more than a week", windows: []WindowSpec{win("22:00", "168h1ns", "Monday")},
			want: `windows[0].duration: must be at most 168h, got "168h1ns"`},
		{name: "too many blackouts", blackouts: blackoutsOf(MaxBlackouts + 1),
			want: "blackouts: at most 64 are allowed, got 65"},
		{name: "a blackout ending as it starts", windows: []WindowSpec{ok},
			blackouts: []Blackout{{Start: jan(1, 0), End: jan(2, 0)}, {Start: jan(5, 0), End: jan(5, 0)}},
			want:      "blackouts[1].end: must be after start (2026-01-05T00:00:00Z), got 2026-01-05T00:00:00Z"},
		{name: "a blackout ending before it starts",
			blackouts: []Blackout{{Start: jan(5, 0), End: jan(4, 23)}},
			want:      "blackouts[0].end: must be after start (2026-01-05T00:00:00Z), got 2026-01-04T23:00:00Z"},
		{name: "a blackout without a start", blackouts: []Blackout{{End: jan(4, 23)}},
			want: "blackouts[0].start: is required"},
		{name: "a blackout without an end", blackouts: []Blackout{{Start: jan(4, 23)}},
			want: "blackouts[0].end: is required"},
		{name: "a blackout past the year 9999",
			blackouts: []Blackout{{Start: jan(4, 23), End: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
			want:      "blackouts[0].end: must be within the years 0001 to 9999, got year 10000"},
		{name: "a blackout before the year 1",
			blackouts: []Blackout{{Start: time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), End: jan(4, 23)}},
			want:      "blackouts[0].start: must be within the years 0001 to 9999, got year 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.tz, tt.windows, tt.blackouts)
			require.ErrorIs(t, err, ErrInvalid)
			require.EqualError(t, err, "invalid upgrade schedule: "+tt.want)
			require.Nil(t, s)
		})
	}
}

// Parse must not keep the caller's slices: the blackouts it merges are its own.
func TestParseCopiesBlackouts(t *testing.T) {
	bs := []Blackout{{Start: time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 6, 11, 0, 0, 0, 0, time.UTC)}}
	s, err := Parse("", nil, bs)
	require.NoError(t, err)
	bs[0].End = time.Date(2026, 6, 20, 0, 0, 0, 0, time.UTC)
	got := viewOf(s.At(time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC)))
	require.Equal(t, opensAt("2026-06-11T00:00:00Z"), got)
}
