package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// barWidth is the number of cells of a stage's progress bar.
const barWidth = 10

// printRollout prints a rollout for a person at now: the release and state, a table of stages with progress bars,
// then the clusters that failed. specPaused is the stream's spec.rollout.paused, which the report may not show yet.
func printRollout(w io.Writer, what string, st *rollout.Status, specPaused bool, now time.Time) error {
	fmt.Fprintf(w, "%s: rolling out %s", what, orNone(st.Release))
	if st.Baseline != "" && st.Baseline != st.Release {
		fmt.Fprintf(w, " (new clusters install %s until it completes)", st.Baseline)
	}
	fmt.Fprintln(w)
	state := st.State
	if st.Message != "" {
		state += ": " + oneLine(st.Message)
	}
	fmt.Fprintf(w, "State: %s\n", state)
	switch {
	case specPaused && st.State != rollout.StatePaused:
		fmt.Fprintln(w, "Paused by spec.rollout.paused; the version resolver has not acted on it yet.")
	case !specPaused && st.State == rollout.StatePaused:
		fmt.Fprintln(w, "Resumed in the spec; the version resolver has not acted on it yet.")
	}
	if st.State == rollout.StatePausedByFailures {
		fmt.Fprintln(w, "The rollout paused itself: a stage exceeded its failure budget. Fix or publish a newer release, then `hyperfleet rollout resume`.")
	}
	fmt.Fprintln(w)

	tw := newTable(w)
	fmt.Fprintln(tw, "STAGE\tSTATE\tUPGRADED\tIN PROGRESS\tWAITING WINDOW\tFAILED\tBLOCKED\tPENDING\tSOAK UNTIL")
	for i := range st.Stages {
		s := &st.Stages[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, s.State, progressBar(s.Upgraded, s.Clusters),
			s.InProgress, s.WaitingWindow, s.Failed, s.Blocked, s.Pending, soakUntil(s.SoakUntil, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Failed) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nFailed clusters (%d):\n", len(st.Failed))
	tw = newTable(w)
	fmt.Fprintln(tw, "CLUSTER\tSTAGE\tVERSION\tREASON\tAGE\tMESSAGE")
	for i := range st.Failed {
		f := &st.Failed[i]
		name := f.Name
		if name == "" {
			name = f.ID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, f.Stage, f.Version, f.Reason, age(now, f.Time), orNone(oneLine(f.Message)))
	}
	return tw.Flush()
}

// progressBar draws done out of total as "[#####-----] 5/10": a full bar only when every cluster is done.
func progressBar(done, total int) string {
	filled := 0
	if total > 0 {
		filled = min(barWidth, max(0, done*barWidth/total))
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), done, total)
}

// soakUntil is when a stage's soak ends, with how long that is from now while it runs; "-" without one.
func soakUntil(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	s := t.UTC().Format(time.RFC3339)
	if d := t.Sub(now); d > 0 {
		s += " (in " + duration.HumanDuration(d) + ")"
	}
	return s
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
