package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestWatchRedrawsWhenPhasesChange(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")

	w := c.start(t, "get", "clusters", "--watch")
	w.eventually(t, "an empty kind says so", func(out, _ string) bool { return out == "No clusters found.\n" })

	c.ok(t, "create", "cluster", "demo", "--spec", clusterSpec)
	pending := regexp.MustCompile(`(?m)^demo\s+stable-4-16\s+<none>\s+-\s+Pending\s+1\s+`)
	w.eventually(t, "the new cluster appears", func(out, _ string) bool { return pending.MatchString(out) })

	s.report(t, "clusters", c.idOf(t, "cluster", "demo"), applier, 1, cond(conditions.Available, conditions.True, ""))
	ready := regexp.MustCompile(`(?m)^demo\s+stable-4-16\s+<none>\s+-\s+Ready\s+1\s+`)
	w.eventually(t, "the table is redrawn with the new phase", func(out, _ string) bool { return ready.MatchString(out) })

	r := w.stop(t)
	require.Equal(t, exitOK, r.code, "Ctrl-C ends a watch normally; stderr: %s", r.err)
	// Not a terminal: a drawing per change of what is shown, separated by blank lines.
	drawings := strings.Split(strings.TrimSpace(r.out), "\n\n")
	require.Len(t, drawings, 3, "stdout: %s", r.out)
	require.Equal(t, "No clusters found.", drawings[0])
	require.Regexp(t, `^NAME\s+VERSION STREAM\s+VERSION\s+HELD\s+PHASE\s+GENERATION\s+AGE\ndemo\s+stable-4-16\s+<none>\s+-\s+Pending\s+1\s+\d+s$`, drawings[1])
	require.Regexp(t, `^NAME\s+VERSION STREAM\s+VERSION\s+HELD\s+PHASE\s+GENERATION\s+AGE\ndemo\s+stable-4-16\s+<none>\s+-\s+Ready\s+1\s+\d+s$`, drawings[2])
}

func TestWatchFollowsANamedResource(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	w := c.start(t, "get", "vs", "stable-4-16", "-w")
	w.eventually(t, "the stream is shown", func(out, _ string) bool { return strings.Contains(out, "Pending") })
	c.ok(t, "delete", "vs", "stable-4-16")
	deleting := regexp.MustCompile(`(?m)^stable-4-16\s+4\.16\s+stable-4\.16\s+False\s+Deleting\s+2\s+`)
	w.eventually(t, "a named watch follows the resource into deletion", func(out, _ string) bool { return deleting.MatchString(out) })
	require.Equal(t, exitOK, w.stop(t).code)
}

func TestRedrawOnATerminal(t *testing.T) {
	k := api.Kinds().Cluster
	p, err := newPrinter(formatTable, false)
	require.NoError(t, err)
	demo := func(phase string) *listing {
		o, err := decodeObject([]byte(`{"id": "7d4fbd4e-7c5c-4e43-a3c9-1e0d7b2a5a10", "kind": "Cluster", "name": "demo", "generation": 1,
			"created_time": "2026-01-01T00:00:00Z", "spec": {"version_stream": "s"}, "status": {"phase": "` + phase + `", "conditions": []}}`))
		require.NoError(t, err)
		return &listing{kind: k, objects: []*object{o}}
	}
	now := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	var out bytes.Buffer
	r := &redraw{w: &out, tty: true, printer: p, now: func() time.Time { return now }}
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

// The watch follows the API's change feed, through a TCP proxy the test can cut: after a disconnect it resumes
// with Last-Event-ID, so that a change made meanwhile arrives; and it warns of each cut rather than ending.
func TestWatchResumesOnTheFeed(t *testing.T) {
	t.Parallel()
	_, p, c, w := watchThroughCutter(t, nil)
	c.seedStream(t, "second")
	w.eventually(t, "a created stream comes from the feed", func(out, _ string) bool {
		return strings.HasSuffix(out, "\n\nversionstream/first\nversionstream/second\n")
	})
	require.False(t, p.sawResume(), "the first watch starts from the list's position")

	// Cut: the stream ends and new connections are refused for a while; the watch retries, then resumes after the
	// last event it had, and the stream created meanwhile arrives.
	p.cut(true)
	c.seedStream(t, "third")
	p.cut(false)
	w.eventually(t, "the change made while cut off arrives", func(out, _ string) bool {
		return strings.HasSuffix(out, "\n\nversionstream/first\nversionstream/second\nversionstream/third\n")
	})
	require.True(t, p.sawResume(), "the watch resumed with Last-Event-ID")
	r := w.stop(t)
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.err, "(retrying)", "the cut was a warning, not an end")
}

// The watch lists again when the API no longer keeps its position: cut off while retention removes the events
// after it (the API keeps two), it resumes, is told 410 HYPERFLEET-WAT-001, lists, and shows every stream.
func TestWatchListsAgainWhenItsPositionIsGone(t *testing.T) {
	t.Parallel()
	s, p, c, w := watchThroughCutter(t, func(cfg *server.Config) { cfg.EventsMax, cfg.EventsCompactEvery = 2, 20*time.Millisecond })
	c.seedStream(t, "second")
	w.eventually(t, "a created stream comes from the feed", func(out, _ string) bool { return strings.HasSuffix(out, "versionstream/second\n") })
	lists := p.lists.Load()
	var page api.ResourceList
	require.NoError(t, json.Unmarshal([]byte(c.ok(t, "api", "GET", "/versionstreams")), &page))
	position := page.ResourceVersion // the feed's head: at or after the watch's position

	p.cut(true)
	for _, name := range []string{"third", "fourth", "fifth", "sixth"} {
		c.seedStream(t, name)
	}
	// Wait until retention has removed the events after the watch's position: a watch from there is 410.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		resp, err := s.client.ClientInterface.(*api.Client).ListResources(ctx, api.Kinds().VersionStream, uuid.Nil,
			&api.ListParams{Watch: ptr(true), ResourceVersion: &position})
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusGone
	}, 10*time.Second, 20*time.Millisecond, "retention removes the events after %s", position)
	p.cut(false)
	w.eventually(t, "a list after the 410 shows every stream", func(out, _ string) bool {
		return strings.HasSuffix(out, "versionstream/first\nversionstream/second\nversionstream/third\nversionstream/fourth\nversionstream/fifth\nversionstream/sixth\n")
	})
	require.True(t, p.sawResume(), "it resumed first")
	require.Greater(t, p.lists.Load(), lists, "then listed again")
	require.Equal(t, exitOK, w.stop(t).code)
}

// watchThroughCutter serves the API (tuned by tune), creates the stream "first", and starts `get vs --watch -o name`
// through a cutter, returning once the watch follows the feed; c talks to the API directly.
func watchThroughCutter(t *testing.T, tune func(*server.Config)) (s *testAPI, p *cutter, c *cli, w *background) {
	t.Helper()
	s = startAPIWith(t, false, tune)
	target, err := url.Parse(s.url)
	require.NoError(t, err)
	p = startCutter(t, target.Host)
	watcher := newCLI(t, s)
	watcher.env["HYPERFLEET_SERVER"] = "http://" + p.addr()
	c = newCLI(t, s)
	c.seedStream(t, "first")
	w = watcher.start(t, "get", "vs", "--watch", "-o", "name")
	w.eventually(t, "the list is shown", func(out, _ string) bool { return out == "versionstream/first\n" })
	require.Eventually(t, p.sawWatch, 10*time.Second, 10*time.Millisecond, "the watch starts after the list")
	return s, p, c, w
}

// cutter is a TCP proxy to an address whose connections the test can cut, and that notes whether a watch went
// through, whether one resumed (a Last-Event-ID header) and how many lists did.
type cutter struct {
	ln               net.Listener
	to               string
	mu               sync.Mutex
	conns            []net.Conn
	down             bool
	watched, resumed atomic.Bool
	lists            atomic.Int32
}

func startCutter(t *testing.T, to string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutter{ln: ln, to: to}
	t.Cleanup(func() { _ = ln.Close(); p.cut(true) })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			out, err := net.Dial("tcp", to)
			if down || err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, io.TeeReader(in, p)); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	return p
}

func (p *cutter) addr() string { return p.ln.Addr().String() }

// Write sees what clients send.
func (p *cutter) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("last-event-id:")) {
		p.resumed.Store(true)
	}
	switch {
	case bytes.Contains(b, []byte("watch=true")):
		p.watched.Store(true)
	case bytes.HasPrefix(b, []byte("GET /api/hyperfleet/v1/versionstreams")):
		p.lists.Add(1)
	}
	return len(b), nil
}

func (p *cutter) sawResume() bool { return p.resumed.Load() }

func (p *cutter) sawWatch() bool { return p.watched.Load() }

// cut closes every connection and, while down, refuses new ones.
func (p *cutter) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
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

// A watch stream the API ends cleanly at its lifetime (a bookmark, then the end) is resumed at once and without a
// warning: only a stream that broke is worth one.
func TestWatchResumesQuietlyAtTheStreamsLifetime(t *testing.T) {
	t.Parallel()
	_, p, c, w := watchThroughCutter(t, func(cfg *server.Config) { cfg.WatchMaxLifetime = 200 * time.Millisecond })
	require.Eventually(t, p.sawResume, 10*time.Second, 10*time.Millisecond, "the stream ended and the watch resumed")
	c.seedStream(t, "second")
	w.eventually(t, "a stream created after the resume arrives", func(out, _ string) bool {
		return strings.HasSuffix(out, "versionstream/first\nversionstream/second\n")
	})
	r := w.stop(t)
	require.Equal(t, exitOK, r.code)
	require.NotContains(t, r.err, "retrying", "a clean end is no warning")
}
