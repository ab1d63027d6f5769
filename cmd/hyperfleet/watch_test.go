package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestWatchRedrawsWhenPhasesChange(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")

	w := c.start(t, "get", "clusters", "--watch", "--interval", "20ms")
	w.eventually(t, "an empty kind says so", func(out, _ string) bool { return out == "No clusters found.\n" })

	c.ok(t, "create", "cluster", "demo", "--spec", clusterSpec)
	pending := regexp.MustCompile(`(?m)^demo\s+stable-4-16\s+Pending\s+1\s+`)
	w.eventually(t, "the new cluster appears", func(out, _ string) bool { return pending.MatchString(out) })

	s.report(t, "clusters", c.idOf(t, "cluster", "demo"), applier, 1, cond(conditions.Available, conditions.True, ""))
	ready := regexp.MustCompile(`(?m)^demo\s+stable-4-16\s+Ready\s+1\s+`)
	w.eventually(t, "the table is redrawn with the new phase", func(out, _ string) bool { return ready.MatchString(out) })

	r := w.stop(t)
	require.Equal(t, exitOK, r.code, "Ctrl-C ends a watch normally; stderr: %s", r.err)
	// Not a terminal: a drawing per change, separated by blank lines, however many polls saw nothing new.
	drawings := strings.Split(strings.TrimSpace(r.out), "\n\n")
	require.Len(t, drawings, 3, "stdout: %s", r.out)
	require.Equal(t, "No clusters found.", drawings[0])
	require.Regexp(t, `^NAME\s+VERSION STREAM\s+PHASE\s+GENERATION\s+AGE\ndemo\s+stable-4-16\s+Pending\s+1\s+\d+s$`, drawings[1])
	require.Regexp(t, `^NAME\s+VERSION STREAM\s+PHASE\s+GENERATION\s+AGE\ndemo\s+stable-4-16\s+Ready\s+1\s+\d+s$`, drawings[2])
}

func TestWatchFollowsANamedResource(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	w := c.start(t, "get", "vs", "stable-4-16", "-w", "--interval", "20ms")
	w.eventually(t, "the stream is shown", func(out, _ string) bool { return strings.Contains(out, "Pending") })
	c.ok(t, "delete", "vs", "stable-4-16")
	deleting := regexp.MustCompile(`(?m)^stable-4-16\s+4\.16\s+stable-4\.16\s+False\s+Deleting\s+2\s+`)
	w.eventually(t, "a named watch follows the resource into deletion", func(out, _ string) bool { return deleting.MatchString(out) })
	require.Equal(t, exitOK, w.stop(t).code)
}

func TestRedrawOnATerminal(t *testing.T) {
	k := newKindSet().all[0]
	demo := func(phase string) *listing {
		o, err := decodeObject([]byte(`{"id": "7d4fbd4e-7c5c-4e43-a3c9-1e0d7b2a5a10", "kind": "Cluster", "name": "demo", "generation": 1,
			"created_time": "2026-01-01T00:00:00Z", "spec": {"version_stream": "s"}, "status": {"phase": "` + phase + `", "conditions": []}}`))
		require.NoError(t, err)
		return &listing{kind: k, objects: []*object{o}}
	}
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	var out bytes.Buffer
	r := &redraw{w: &out, tty: true, format: formatTable, now: func() time.Time { return now }}
	for _, l := range []*listing{demo("Pending"), demo("Pending"), demo("Ready")} {
		require.NoError(t, r.draw(l))
	}
	screens := strings.Split(out.String(), clearScreen)
	require.Len(t, screens, 3, "the first drawing and the change; the unchanged one is not redrawn")
	require.Regexp(t, `(?m)^demo\s+s\s+Pending\s+1\s+30s$`, screens[1])
	require.Regexp(t, `(?m)^demo\s+s\s+Ready\s+1\s+30s$`, screens[2])

	// On a terminal the passing of time is a change: ages move on.
	now = now.Add(time.Minute)
	require.NoError(t, r.draw(demo("Ready")))
	require.Regexp(t, `(?m)^demo\s+s\s+Ready\s+1\s+90s$`, out.String())
}

func TestPollerRetriesWhatMayPass(t *testing.T) {
	calls := 0
	var warned []string
	fetch := func(context.Context) (int, error) {
		calls++
		switch calls {
		case 1:
			return 0, &unreachableError{server: "http://x", err: errors.New("connection refused")}
		case 2:
			return 0, &apiError{status: 503}
		case 3:
			return 3, nil
		default:
			return 0, &apiError{status: 404}
		}
	}
	var got []int
	err := newSource(time.Millisecond, fetch, func(err error) { warned = append(warned, err.Error()) }).
		follow(context.Background(), func(v int) error { got = append(got, v); return nil })
	var aerr *apiError
	require.ErrorAs(t, err, &aerr, "a 404 ends the poll")
	require.Equal(t, []int{3}, got)
	require.Len(t, warned, 2)
}
