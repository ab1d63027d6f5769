package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// drain reads a watch to its end and returns its events; it fails the test unless the stream ended cleanly (the
// server closed it after a whole event) within a minute.
func (w *watcher) drain() []sseEvent {
	w.t.Helper()
	var events []sseEvent
	timeout := time.After(time.Minute)
	for {
		select {
		case e, ok := <-w.events:
			if !ok {
				require.NoError(w.t, <-w.done, "the stream ended cleanly")
				return events
			}
			events = append(events, e)
		case <-timeout:
			w.t.Fatal("the watch did not end within a minute")
			return nil
		}
	}
}

// Watches are bounded per identity and in total: one more is 429 HYPERFLEET-LMT-004 with Retry-After, and closing
// one makes room again.
func TestWatchesAreCapped(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  server.Config
	}{
		{"per identity", server.Config{WatchesPerIdentity: 2}},
		{"in total", server.Config{WatchesTotal: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startServerOn(t, harness.NewDatabase(t), tt.cfg)
			first := watch(t, s.base, "/clusters", nil)
			watch(t, s.base, "/versionstreams", nil)
			resp, cancel := openWatch(t, s.base, "/clusters", nil)
			p := problem(t, resp, []byte(readAll(t, resp)), http.StatusTooManyRequests, "HYPERFLEET-LMT-004")
			cancel()
			require.Equal(t, "10", resp.Header.Get("Retry-After"))
			require.Contains(t, deref(p.Detail), "too many watches")

			// Lists are not watches: still served.
			list, err := s.ListClustersWithResponse(ctxFor(t), nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, list.StatusCode())

			first.close()
			require.Eventually(t, func() bool {
				resp, cancel := openWatch(t, s.base, "/clusters", nil)
				defer cancel()
				defer resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 10*time.Second, 20*time.Millisecond, "a closed watch frees its place")
		})
	}
}

// A watch stream ends cleanly at its lifetime, its last event a bookmark, and the client resumes from it with
// Last-Event-ID (authenticating again) and misses nothing.
func TestWatchLifetimeEndsCleanly(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{WatchMaxLifetime: 300 * time.Millisecond})
	w := watch(t, s.base, "/clusters?resource_version="+listPosition(t, s), nil)
	createCluster(t, s, "before-the-end", nil)
	events := w.drain()
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	require.Equal(t, api.BookmarkEvent, last.Event, "a clean end says where to resume")
	require.Equal(t, "created", events[0].Event)
	seen, err := seqOf(events[0].ID)
	require.NoError(t, err)
	pos, err := seqOf(last.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, pos, seen)

	createCluster(t, s, "after-the-end", nil)
	resumed := watch(t, s.base, "/clusters", http.Header{"Last-Event-ID": {last.ID}})
	e := resumed.next()
	require.Equal(t, "created", e.Event)
	require.Equal(t, "after-the-end", objectName(t, e.Data.Object))
}

// Shutting down ends open watch streams cleanly (a bookmark, then the end of the stream) instead of waiting out the
// shutdown timeout for them: with a ten-minute timeout the server still stops, and the stream's client has a
// position to resume from on another replica.
func TestShutdownEndsWatches(t *testing.T) {
	dsn := harness.NewDatabase(t)
	seedStream(t, dsn, defaultStream)
	srv := apitest.Start(t, server.Config{DB: server.DBConfig{URL: dsn}, ShutdownTimeout: 10 * time.Minute})
	w := watch(t, srv.API, "/clusters", nil)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		srv.Stop()
	}()
	events := w.drain()
	require.NotEmpty(t, events)
	require.Equal(t, api.BookmarkEvent, events[len(events)-1].Event)
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("the server waited for the open watch instead of ending it")
	}
}
