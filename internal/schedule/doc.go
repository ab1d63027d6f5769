// Package schedule decides when a cluster's UpgradeSchedule lets the HostedCluster applier roll a new release
// image. It is pure maths: Parse validates the API's strings once, and Schedule.At answers, for an instant the
// caller supplies, whether the schedule is open and when that changes. Nothing here reads a clock or keeps state
// between calls.
//
// A schedule has a time zone (default UTC), up to MaxWindows weekly windows and up to MaxBlackouts blackouts:
//
//   - A window opens on each of its days at its start, a wall-clock time in the schedule's zone, and stays open
//     for its duration of elapsed time (more than zero, at most a week). It may run past midnight and past the
//     end of the week: a Sunday 22:00 window of 6h is still open at Monday 02:00.
//   - A blackout is a range of instants [start, end) in which nothing may roll, even inside a window.
//   - The schedule is open at t if and only if t is in some window (start ≤ t < end) and in no blackout
//     (start ≤ t < end). With no windows at all it is open whenever no blackout holds.
//
// Ranges are unions: overlapping and touching windows form one open period, as do overlapping and touching
// blackouts, and a window that blackouts cover entirely never opens.
//
// Daylight saving time follows RFC 5545 (iCalendar):
//
//   - A start the clocks skip (spring forward) is read with the UTC offset in force before the skip, so it moves
//     forward by the gap: in Europe/Berlin on 2026-03-29 a 02:30 window opens at 03:30 CEST, and in
//     America/New_York on 2026-03-08 a 02:30 window opens at 03:30 EDT. (time.Date does this in Berlin but
//     moves backwards to 01:30 EST in New York, so the package does not rely on it.)
//   - A start the clocks read twice (fall back) opens at its first reading: 02:30 CEST, not 02:30 CET, in Berlin
//     on 2026-10-25 (time.Date picks the second there).
//   - A duration is elapsed time, so a window of 4h across a change lasts four real hours and ends an hour later
//     or earlier by the wall clock. In the same way, windows that tile the week by the clock (every day 00:00 for
//     24h, Monday 00:00 for 168h) overlap in the week the clocks go forward and leave an hour's gap in the week
//     they go back.
//
// At returns, for an open schedule, when the open period ends (Until): the end of the merged window or the start
// of the next blackout, whichever comes first, or the zero time if the period does not end within 400 days
// (windows that cover the whole week with no blackout ahead, or no windows and no blackout ahead). For a closed
// schedule it returns the earliest instant after t at which it is open (NextOpen): the start of a later window,
// or the end of the blackout that holds or covers the next window, whichever first lands in a window outside
// every blackout. Blackouts are finite and windows recur every week, so a valid schedule always opens again,
// within about a week of its last blackout's end; At needs no search horizon for NextOpen and has no error to
// return.
package schedule
