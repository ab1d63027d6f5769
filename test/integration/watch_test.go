package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// sseEvent is one Server-Sent Event of a watch.
type sseEvent struct {
	ID    string
	Event string
	Data  api.WatchEvent
	Raw   string
	// received is when the watcher read the event's end.
	received time.Time
}

// watcher reads a watch stream.
type watcher struct {
	t      testing.TB
	resp   *http.Response
	events chan sseEvent
	done   chan error
	cancel context.CancelFunc
}

// watch opens GET path (with watch=true added) and parses its events as they come; header may hold
// Last-Event-ID. It fails the test unless the watch starts (200, text/event-stream).
func watch(t testing.TB, base, path string, header http.Header) *watcher {
	t.Helper()
	resp, cancel := openWatch(t, base, path, header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %d %s", path, resp.StatusCode, readAll(t, resp))
	}
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	w := &watcher{t: t, resp: resp, events: make(chan sseEvent, 1000), done: make(chan error, 1), cancel: cancel}
	schema := watchEventSchema(t)
	go func() {
		defer close(w.events)
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(make([]byte, 1<<20), 8<<20)
		var e sseEvent
		for lines.Scan() {
			line := lines.Text()
			switch {
			case line == "":
				if e.ID != "" || e.Raw != "" {
					e.received = time.Now()
					w.events <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				e.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				e.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.Raw = strings.TrimPrefix(line, "data: ")
				var doc any
				if err := json.Unmarshal([]byte(e.Raw), &doc); err != nil {
					w.done <- fmt.Errorf("event data is not JSON: %w: %s", err, e.Raw)
					return
				}
				if e.Event != "error" && e.Event != api.BookmarkEvent {
					if err := schema.VisitJSON(doc); err != nil {
						w.done <- fmt.Errorf("event data does not match WatchEvent: %w: %s", err, e.Raw)
						return
					}
					if err := json.Unmarshal([]byte(e.Raw), &e.Data); err != nil {
						w.done <- err
						return
					}
				}
			}
		}
		w.done <- lines.Err()
	}()
	t.Cleanup(w.close)
	return w
}

func openWatch(t testing.TB, base, path string, header http.Header) (*http.Response, context.CancelFunc) {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/hyperfleet/v1"+path+sep+"watch=true", http.NoBody)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	// A server that never answers fails the test here rather than hanging it.
	client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 30 * time.Second}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	return resp, cancel
}

func (w *watcher) close() {
	w.cancel()
	_ = w.resp.Body.Close()
}

// next returns the next event, failing the test if none comes within ten seconds.
func (w *watcher) next() sseEvent {
	w.t.Helper()
	select {
	case e, ok := <-w.events:
		if !ok {
			w.t.Fatalf("the watch ended: %v", <-w.done)
		}
		return e
	case <-time.After(10 * time.Second):
		w.t.Fatal("no event within 10 s")
		return sseEvent{}
	}
}

// quiet fails the test if an event comes within d.
func (w *watcher) quiet(d time.Duration) {
	w.t.Helper()
	select {
	case e := <-w.events:
		w.t.Fatalf("unexpected event %s %s: %s", e.ID, e.Event, e.Raw)
	case <-time.After(d):
	}
}

func watchEventSchema(t testing.TB) *openapi3.Schema {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	require.NoError(t, err)
	return doc.Components.Schemas["WatchEvent"].Value
}

// listPosition lists clusters and returns the list's resource_version.
func listPosition(t *testing.T, s *apiServer) string {
	t.Helper()
	resp, err := s.ListClustersWithResponse(ctxFor(t), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode())
	require.NotEmpty(t, resp.JSON200.ResourceVersion)
	return resp.JSON200.ResourceVersion
}

// A watch started from a list's position sees every later change of the kind, in order, each with its resource
// as a GET would show it: created, updated, status (an adapter's report changed the aggregate), deleting and
// removed. Heartbeat reports that change nothing send nothing.
func TestWatchStreamsEveryChangeInOrder(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	from := listPosition(t, s)
	w := watch(t, s.base, "/clusters?resource_version="+from, nil)

	c := createCluster(t, s, "watched", map[string]string{"env": "dev"})
	_, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
		api.ResourcePatch{Labels: &map[string]*string{"env": ptr("prod")}})
	require.NoError(t, err)
	at := time.Now().UTC()
	postClusterStatus(t, s, c, report("applier", 1, at, available("True")), http.StatusCreated)
	postClusterStatus(t, s, c, report("applier", 1, at.Add(time.Second), available("True")), http.StatusOK) // a heartbeat
	_, err = s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	postClusterStatus(t, s, c, report("applier", 2, at.Add(2*time.Second), available("False"), cond("Finalized", "True", "")), http.StatusOK)

	last := int64(0)
	// The finalizing report changes the aggregate (status) before the cluster goes (removed).
	for _, want := range []string{"created", "updated", "status", "deleting", "status", "removed"} {
		e := w.next()
		require.Equal(t, want, e.Event, "data: %s", e.Raw)
		require.Equal(t, want, string(e.Data.Type))
		epoch, _, _ := strings.Cut(from, ".")
		require.Equal(t, epoch+"."+strconv.FormatInt(e.Data.Seq, 10), e.ID, "an event's id is its position: the feed's epoch and its sequence")
		require.Greater(t, e.Data.Seq, last, "in order")
		last = e.Data.Seq
		require.Equal(t, c.Id, e.Data.Id)
		require.Equal(t, "Cluster", e.Data.Kind)
		if want == "removed" {
			require.Nil(t, e.Data.Object)
			continue
		}
		// The object is the resource as of delivery: present unless it was removed by then.
		if e.Data.Object != nil {
			require.Equal(t, "watched", objectName(t, e.Data.Object))
		}
	}
	w.quiet(300 * time.Millisecond)

	// Node pools are watched under their cluster, or across clusters.
	other := createCluster(t, s, "parent", nil)
	nested := watch(t, s.base, "/clusters/"+other.Id.String()+"/nodepools", nil)
	flat := watch(t, s.base, "/nodepools", nil)
	createNodePool(t, s, other, "pool", 1)
	for _, pw := range []*watcher{nested, flat} {
		e := pw.next()
		require.Equal(t, "created", e.Event)
		require.Equal(t, "NodePool", e.Data.Kind)
		require.Equal(t, other.Id, *e.Data.ParentId)
	}
}

// The list's filters apply: a watch with search sees the resources the search matches, and one with
// pending_for those its adapter has work on.
func TestWatchFilters(t *testing.T) {
	s := startServer(t)
	bySearch := watch(t, s.base, "/clusters?search="+urlQuery("labels.team = 'core'"), nil)
	pending := watch(t, s.base, "/clusters?pending_for=applier", nil)
	c := createCluster(t, s, "core-one", map[string]string{"team": "core"})
	createCluster(t, s, "edge-one", map[string]string{"team": "edge"})
	e := bySearch.next()
	require.Equal(t, "core-one", objectName(t, e.Data.Object))
	bySearch.quiet(300 * time.Millisecond)

	require.Equal(t, "created", pending.next().Event)
	require.Equal(t, "created", pending.next().Event)
	// The applier's report settles the cluster: it leaves the applier's pending work, and the watcher is told so.
	postClusterStatus(t, s, c, report("applier", 1, time.Now().UTC(), available("True")), http.StatusCreated)
	e = pending.next()
	require.Equal(t, "left", e.Event)
	require.Equal(t, c.Id, e.Data.Id)
	pending.quiet(300 * time.Millisecond)

	for _, bad := range []string{"/clusters?search=" + urlQuery("nonsense ==="), "/clusters?resource_version=x"} {
		resp, cancel := openWatch(t, s.base, bad, nil)
		problem(t, resp, []byte(readAll(t, resp)), http.StatusBadRequest, map[bool]string{true: "HYPERFLEET-VAL-003", false: "HYPERFLEET-VAL-004"}[strings.Contains(bad, "search")])
		cancel()
	}
}

// A watcher that was away resumes with Last-Event-ID and gets exactly what it missed, in order.
func TestWatchResumesExactly(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "resumed", nil)
	w := watch(t, s.base, "/clusters?resource_version="+listPosition(t, s), nil)
	label := func(i int) {
		_, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
			api.ResourcePatch{Labels: &map[string]*string{"n": ptr(strconv.Itoa(i))}})
		require.NoError(t, err)
	}
	label(0)
	// The list may already show a change whose event comes after its position (the create's): skip to the label's.
	seen := w.next()
	for seen.Event != "updated" {
		seen = w.next()
	}
	w.close()

	const missed = 25
	for i := 1; i <= missed; i++ {
		label(i)
	}
	again := watch(t, s.base, "/clusters", http.Header{"Last-Event-Id": {seen.ID}})
	prev := seen.Data.Seq
	for i := 1; i <= missed; i++ {
		e := again.next()
		require.Equal(t, "updated", e.Event)
		require.Greater(t, e.Data.Seq, prev)
		prev = e.Data.Seq
	}
	again.quiet(300 * time.Millisecond)
}

// Retention removes old events; a watcher behind it is told 410 and lists again.
func TestWatchBehindRetentionIsGone(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EventsMax: 5, EventsCompactEvery: 50 * time.Millisecond})
	ctx := ctxFor(t)
	start := listPosition(t, s)
	c := createCluster(t, s, "compacted", nil)
	for i := range 20 {
		_, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
			api.ResourcePatch{Labels: &map[string]*string{"n": ptr(strconv.Itoa(i))}})
		require.NoError(t, err)
	}
	db, err := pgx.Connect(ctx, s.dsn)
	require.NoError(t, err)
	defer db.Close(ctx)
	require.Eventually(t, func() bool {
		var through int64
		return db.QueryRow(ctx, "SELECT compacted_through FROM event_feed").Scan(&through) == nil && through >= 15
	}, 10*time.Second, 20*time.Millisecond, "retention keeps at most 5 events")

	resp, cancel := openWatch(t, s.base, "/clusters?resource_version="+start, nil)
	defer cancel()
	p := problem(t, resp, []byte(readAll(t, resp)), http.StatusGone, "HYPERFLEET-WAT-001")
	require.Contains(t, *p.Detail, "list again")

	// Listing again gives a position that can be watched from.
	w := watch(t, s.base, "/clusters?resource_version="+listPosition(t, s), nil)
	_, err = s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
		api.ResourcePatch{Labels: &map[string]*string{"n": ptr("after")}})
	require.NoError(t, err)
	require.Equal(t, "updated", w.next().Event)
}

// The change feed is the database's: a watcher on one API process sees changes made through another.
func TestWatchAcrossAPIProcesses(t *testing.T) {
	s := startServer(t)
	other := startAPIProcess(t, s.dsn)
	otherBase := strings.TrimSuffix(other.base, "/api/hyperfleet/v1")
	here := watch(t, s.base, "/clusters", nil)
	there := watch(t, otherBase, "/clusters", nil)

	createCluster(t, s, "made-here", nil)
	require.Equal(t, "made-here", objectName(t, there.next().Data.Object))
	require.Equal(t, "made-here", objectName(t, here.next().Data.Object))

	resp, err := http.Post(other.base+"/clusters", "application/json", strings.NewReader(
		`{"name": "made-there", "spec": {"version_stream": "`+defaultStream+`", "hosted_cluster": {"dns": {"base_domain": "example.com"}}}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", readAll(t, resp))
	require.Equal(t, "made-there", objectName(t, here.next().Data.Object))
	require.Equal(t, "made-there", objectName(t, there.next().Data.Object))
}

func urlQuery(s string) string {
	r := strings.NewReplacer(" ", "%20", "'", "%27", "=", "%3D")
	return r.Replace(s)
}

// objectName is the name of the resource a watch event carries.
func objectName(tb testing.TB, object json.RawMessage) string {
	tb.Helper()
	var r api.Resource
	require.NoError(tb, json.Unmarshal(object, &r), "%s", object)
	return r.Name
}
