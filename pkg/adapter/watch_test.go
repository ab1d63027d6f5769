package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// stubFeed is a feed whose lists return scripted positions and whose handler records the events it gets.
type stubFeed struct {
	mu        sync.Mutex
	positions []string
	lists     int
	handled   []int64
	events    chan int64
}

func (f *stubFeed) feedKind() *Kind { return VersionStreams() }

func (f *stubFeed) list(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return f.positions[min(f.lists, len(f.positions))-1], nil
}

func (f *stubFeed) watchQuery() listQuery { return listQuery{pendingFor: "test-adapter"} }

func (f *stubFeed) handle(_ context.Context, e *feedEvent) error {
	f.mu.Lock()
	f.handled = append(f.handled, e.Seq)
	f.mu.Unlock()
	f.events <- e.Seq
	return nil
}

// sseFrame is one event of a watch stream as the API writes it.
func sseFrame(t *testing.T, seq int64) string {
	data, err := json.Marshal(api.WatchEvent{Seq: seq, Type: api.WatchEventTypeCreated, Kind: "VersionStream", Id: uuid.New(),
		Generation: 1, ResourceVersion: "1", Time: time.Now()})
	assert.NoError(t, err) // called from the server's goroutine
	return fmt.Sprintf("id: %d\nevent: created\ndata: %s\n\n", seq, data)
}

// watchRequest is what a watch asked for.
type watchRequest struct{ resourceVersion, lastEventID string }

// The watch source against an API that ends streams, sends an error event, goes silent and answers 410: it
// resumes with Last-Event-ID after an ended or silent stream, lists again after the error event and the 410, and
// hands every event on once, in order.
func TestWatchSourceResumesAndListsAgain(t *testing.T) {
	var mu sync.Mutex
	var requests []watchRequest
	// One behaviour per connection, in order.
	script := []func(w http.ResponseWriter, r *http.Request){
		func(w http.ResponseWriter, _ *http.Request) { // the stream ends after one event
			_, _ = io.WriteString(w, ": watching after 10\n\n"+sseFrame(t, 11))
		},
		func(w http.ResponseWriter, _ *http.Request) { // one event, then the API says the position fell behind
			_, _ = io.WriteString(w, sseFrame(t, 12)+"event: error\ndata: {\"code\":\"HYPERFLEET-WAT-001\",\"detail\":\"behind\"}\n\n")
		},
		func(w http.ResponseWriter, r *http.Request) { // one event, then silence: the idle timeout ends it
			_, _ = io.WriteString(w, sseFrame(t, 21))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
		func(w http.ResponseWriter, _ *http.Request) { // the position expired before the stream started
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusGone)
			_, _ = io.WriteString(w, `{"type":"about:blank","title":"Gone","status":410,"code":"HYPERFLEET-WAT-001","detail":"list again"}`)
		},
		func(w http.ResponseWriter, r *http.Request) { // a stream that stays
			_, _ = io.WriteString(w, sseFrame(t, 31))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The handler runs outside the test's goroutine: assert, not require.
		assert.Equal(t, "/api/hyperfleet/v1/versionstreams", r.URL.Path)
		assert.Equal(t, "true", r.URL.Query().Get("watch"))
		assert.Equal(t, "test-adapter", r.URL.Query().Get("pending_for"))
		assert.Equal(t, "text/event-stream", r.Header.Get("Accept"))
		mu.Lock()
		requests = append(requests, watchRequest{r.URL.Query().Get("resource_version"), r.Header.Get("Last-Event-ID")})
		n := len(requests)
		mu.Unlock()
		if n > len(script) {
			<-r.Context().Done()
			return
		}
		if n != 4 {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		script[n-1](w, r)
	}))
	t.Cleanup(srv.Close)

	cfg := Defaults("test-adapter", "127.0.0.1:0")
	cfg.APIURL, cfg.WatchIdleTimeout, cfg.BackoffBase, cfg.BackoffMax = srv.URL, 300*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.ops.Close() })
	feed := &stubFeed{positions: []string{"10", "20", "30"}, events: make(chan int64, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { (&watchSource{r: r, feed: feed}).run(ctx); close(done) }()

	for _, want := range []int64{11, 12, 21, 31} {
		select {
		case got := <-feed.events:
			require.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not come", want)
		}
	}
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []watchRequest{
		{resourceVersion: "10"}, // after the first list
		{lastEventID: "11"},     // resumed after the stream ended
		{resourceVersion: "20"}, // listed again after the error event
		{lastEventID: "21"},     // resumed after the silence; answered 410
		{resourceVersion: "30"}, // listed again after the 410
	}, requests)
	require.Equal(t, 3, feed.lists)
	require.Equal(t, []int64{11, 12, 21, 31}, feed.handled)
	metrics := scrapeOps(t, r)
	for _, series := range []string{
		`hyperfleet_adapter_relists_total{adapter="test-adapter",kind="VersionStream",reason="start"} 1`,
		`hyperfleet_adapter_relists_total{adapter="test-adapter",kind="VersionStream",reason="expired"} 2`,
		`hyperfleet_adapter_source_reconnects_total{adapter="test-adapter",kind="VersionStream",source="watch"} 2`,
		`hyperfleet_adapter_feed_position{adapter="test-adapter",kind="VersionStream",source="watch"} 31`,
		`hyperfleet_adapter_events_received_total{adapter="test-adapter",kind="VersionStream",source="watch",type="created"} 4`,
		`hyperfleet_adapter_event_lag_seconds_count{adapter="test-adapter",source="watch"} 4`,
	} {
		require.Contains(t, metrics, series+"\n")
	}
	require.NotContains(t, metrics, `reason="failed"`)
}

// scrapeOps returns the runner's /metrics.
func scrapeOps(t *testing.T, r *Runner) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.opsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", http.NoBody))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// An event the API relays without filters (NATS) is offered only when the adapter has work on it: its own last
// report decides where it can, the API's pending_for where it cannot.
func TestPendingDecidesUnfilteredEvents(t *testing.T) {
	id := uuid.New()
	var mu sync.Mutex
	asked := 0
	pendingInAPI := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		pending := pendingInAPI
		mu.Unlock()
		q := r.URL.Query()
		assert.Equal(t, "test-adapter", q.Get("pending_for"))
		assert.Equal(t, "id = '"+id.String()+"'", q.Get("search"))
		items := "[]"
		if pending {
			items = `[{"id":"` + id.String() + `","kind":"VersionStream","href":"/x"}]`
		}
		w.Header().Set("Content-Type", api.SparseMediaType)
		_, _ = io.WriteString(w, `{"kind":"VersionStreamList","page":1,"size":1,"total":1,"resource_version":"5","items":`+items+`}`)
	}))
	t.Cleanup(srv.Close)
	cfg := Defaults("test-adapter", "127.0.0.1:0")
	cfg.APIURL = srv.URL
	r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.ops.Close() })
	s := &pendingSource{r: r, kind: VersionStreams()}
	key := Key{Kind: "versionstreams", ID: id.String()}

	tests := []struct {
		name       string
		typ        api.WatchEventType
		generation int64
		reported   int64 // the generation of the cached report; 0: none
		inAPI      bool  // whether the API lists it as pending
		want       bool
		asks       bool // whether the API is asked
	}{
		{name: "created", typ: api.WatchEventTypeCreated, generation: 1, want: true},
		{name: "deleting", typ: api.WatchEventTypeDeleting, generation: 3, reported: 2, want: true},
		{name: "a report at the reported generation", typ: api.WatchEventTypeStatus, generation: 2, reported: 2},
		{name: "a label change", typ: api.WatchEventTypeUpdated, generation: 2, reported: 2},
		{name: "an older generation than reported", typ: api.WatchEventTypeStatus, generation: 1, reported: 2},
		{name: "a spec change after the report", typ: api.WatchEventTypeUpdated, generation: 3, reported: 2, inAPI: true, want: true, asks: true},
		{name: "no report kept, pending", typ: api.WatchEventTypeStatus, generation: 2, inAPI: true, want: true, asks: true},
		{name: "no report kept, settled", typ: api.WatchEventTypeStatus, generation: 2, asks: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.reports.forget(key)
			if tt.reported > 0 {
				r.reports.posted(key, api.AdapterStatusReport{ObservedGeneration: tt.reported, ObservedTime: time.Now()}, time.Now())
			}
			mu.Lock()
			asked, pendingInAPI = 0, tt.inAPI
			mu.Unlock()
			got, err := s.pending(context.Background(), &feedEvent{WatchEvent: api.WatchEvent{Type: tt.typ, Id: id, Generation: tt.generation}}, key)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tt.asks, asked > 0, "asked the API")
		})
	}
}

func TestConsumerName(t *testing.T) {
	require.Equal(t, "version-resolver_versionstream_0of1", ConsumerName("version-resolver", VersionStreams(), 0, 1))
	require.Equal(t, "hivelocity-provisioner_nodepool_2of3", ConsumerName("hivelocity-provisioner", NodePools(), 2, 3))
	require.False(t, strings.ContainsAny(ConsumerName("a", UpgradeSchedules(), 0, 1), ".*> "), "a JetStream consumer name")
}

func TestRetryDelay(t *testing.T) {
	tests := []struct {
		name          string
		base, ceiling time.Duration
		failures      int
		want          time.Duration // ±10 %
	}{
		{name: "first failure", base: time.Second, ceiling: 5 * time.Minute, failures: 1, want: time.Second},
		{name: "doubling", base: time.Second, ceiling: 5 * time.Minute, failures: 4, want: 8 * time.Second},
		{name: "at most 30 s for a source", base: time.Second, ceiling: 5 * time.Minute, failures: 20, want: maxSourceRetry},
		{name: "or the queue's max when lower", base: 50 * time.Millisecond, ceiling: time.Second, failures: 10, want: time.Second},
		{name: "very many failures", base: time.Second, ceiling: 5 * time.Minute, failures: 1000, want: maxSourceRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runner{cfg: Config{BackoffBase: tt.base, BackoffMax: tt.ceiling}}
			for range 20 {
				got := r.retryDelay(tt.failures)
				require.InDelta(t, float64(tt.want), float64(got), 0.1*float64(tt.want))
				require.LessOrEqual(t, got, min(tt.ceiling, maxSourceRetry))
			}
		})
	}
}

// slowFeed is a stubFeed whose handler takes delay per event.
type slowFeed struct {
	*stubFeed
	delay time.Duration
}

func (f *slowFeed) handle(ctx context.Context, e *feedEvent) error {
	time.Sleep(f.delay)
	return f.stubFeed.handle(ctx, e)
}

// The idle timeout measures the connection's silence, not the handler's time: an event that takes three idle
// timeouts to handle, on a stream that keeps sending heartbeats, ends no connection.
func TestWatchIdleTimeoutIgnoresTheHandlersTime(t *testing.T) {
	var connections atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		connections.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseFrame(t, 11)+sseFrame(t, 12))
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
				_, _ = io.WriteString(w, "id: 12\nevent: "+api.BookmarkEvent+"\ndata: {\"position\":\"12\"}\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	cfg := Defaults("test-adapter", "127.0.0.1:0")
	cfg.APIURL, cfg.WatchIdleTimeout, cfg.BackoffBase, cfg.BackoffMax = srv.URL, 200*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.ops.Close() })
	feed := &slowFeed{stubFeed: &stubFeed{positions: []string{"10"}, events: make(chan int64, 10)}, delay: 600 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { (&watchSource{r: r, feed: feed}).run(ctx); close(done) }()
	for _, want := range []int64{11, 12} {
		select {
		case got := <-feed.events:
			require.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not come", want)
		}
	}
	time.Sleep(time.Second) // heartbeats only: five idle timeouts
	cancel()
	<-done
	require.Equal(t, int32(1), connections.Load(), "one connection, kept")
	require.NotContains(t, scrapeOps(t, r), "hyperfleet_adapter_source_reconnects_total{")
}
