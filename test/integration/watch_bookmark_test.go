package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// A watch that shows nothing while the feed moves on (other kinds change) still says how far it has read: its
// bookmarks carry the stream's position as their id:, so Last-Event-ID moves on and a watcher that resumes from
// it after retention dropped the events it was not shown is not told 410, while one resuming from where it
// started is. This is the quiet watcher that would otherwise fall off retention though it missed nothing.
func TestQuietWatchKeepsItsPosition(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EventsMax: 5, EventsCompactEvery: 50 * time.Millisecond, WatchHeartbeat: 100 * time.Millisecond})
	ctx := ctxFor(t)
	start := listPosition(t, s)
	quiet := watch(t, s.base, "/versionstreams?resource_version="+start+"&search="+urlQuery("name = 'no-such-stream'"), nil)
	all := watch(t, s.base, "/clusters?resource_version="+start, nil)

	c := createCluster(t, s, "busy", nil)
	for i := range 20 {
		_, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
			api.ResourcePatch{Labels: &map[string]*string{"n": ptr(strconv.Itoa(i))}})
		require.NoError(t, err)
	}
	var last string
	for range 21 {
		last = all.next().ID
	}
	lastSeq, err := seqOf(last)
	require.NoError(t, err)

	// The quiet watch sends only bookmarks, until one says it has read past every cluster change.
	var position string
	for {
		e := quiet.next()
		require.Equal(t, api.BookmarkEvent, e.Event, "the quiet watch shows nothing: %s", e.Raw)
		require.Equal(t, `{"position":"`+e.ID+`"}`, e.Raw)
		seq, err := seqOf(e.ID)
		require.NoError(t, err)
		if seq >= lastSeq {
			position = e.ID
			break
		}
	}

	db, err := pgx.Connect(ctx, s.dsn)
	require.NoError(t, err)
	defer db.Close(ctx)
	require.Eventually(t, func() bool {
		var through int64
		return db.QueryRow(ctx, "SELECT compacted_through FROM event_feed").Scan(&through) == nil && through > 10
	}, 10*time.Second, 20*time.Millisecond, "retention keeps at most 5 events")

	resp, cancel := openWatch(t, s.base, "/versionstreams?search="+urlQuery("name = 'no-such-stream'"),
		http.Header{"Last-Event-ID": {start}})
	problem(t, resp, []byte(readAll(t, resp)), http.StatusGone, "HYPERFLEET-WAT-001")
	cancel()
	resumed := watch(t, s.base, "/versionstreams?search="+urlQuery("name = 'no-such-stream'"), http.Header{"Last-Event-ID": {position}})
	require.Equal(t, api.BookmarkEvent, resumed.next().Event, "resumed from its bookmark, not expired")
}

// seqOf reads the sequence number of a position (<epoch>.<seq>), to compare two positions of one epoch; clients
// treat positions as opaque, a test may look inside.
func seqOf(position string) (int64, error) {
	return strconv.ParseInt(position[strings.LastIndexByte(position, '.')+1:], 10, 64)
}
