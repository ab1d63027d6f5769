package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// A restore, simulated: the events after a point are gone, the sequence hands their numbers out again, and the
// operator runs `migrate --renew-feed-epoch`. A watcher connected at the time is told (an error event with the
// expired code), and one that comes back with its old position (Last-Event-ID or resource_version) gets 410 and
// lists again: none of them silently skips the new events that reuse the old numbers. A bare number, a position
// from before positions had epochs, is 410 too.
func TestWatchAcrossARestoreIsGone(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	for i := range 5 {
		createCluster(t, s, "before-"+strconv.Itoa(i), nil)
	}
	old := listPosition(t, s)
	w := watch(t, s.base, "/clusters?resource_version="+old, nil)

	db := harnessDB(t, s)
	require.NoError(t, db.Exec("DELETE FROM events WHERE seq > 2").Error)
	require.NoError(t, db.Exec("ALTER TABLE events ALTER COLUMN seq RESTART WITH 3").Error)
	_, renewed, err := postgres.RenewFeedEpoch(ctx, db)
	require.NoError(t, err)

	// The list's position may precede the last creates (the feed had not read them yet): those come first.
	e := w.next()
	for e.Event == "created" {
		e = w.next()
	}
	require.Equal(t, "error", e.Event, "the connected watcher is told: %s", e.Raw)
	require.Contains(t, e.Raw, "HYPERFLEET-WAT-001")
	require.Eventually(t, func() bool { return strings.HasPrefix(listPosition(t, s), renewed+".") }, 10*time.Second,
		20*time.Millisecond, "lists give positions of the new epoch")
	for i := range 10 { // the new history passes the old numbers
		createCluster(t, s, "after-"+strconv.Itoa(i), nil)
	}

	oldEpoch, _, _ := strings.Cut(old, ".")
	for _, tc := range []struct {
		name   string
		path   string
		header http.Header
	}{
		{"resource_version of the old epoch", "/clusters?resource_version=" + old, nil},
		{"Last-Event-ID of the old epoch", "/clusters", http.Header{"Last-Event-ID": {oldEpoch + ".4"}}},
		{"a bare number", "/clusters?resource_version=4", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, cancel := openWatch(t, s.base, tc.path, tc.header)
			defer cancel()
			p := problem(t, resp, []byte(readAll(t, resp)), http.StatusGone, "HYPERFLEET-WAT-001")
			require.Contains(t, *p.Detail, "list again")
		})
	}

	// Listing again gives a position of the new epoch that watches from there.
	w = watch(t, s.base, "/clusters?resource_version="+listPosition(t, s), nil)
	c := createCluster(t, s, "watched", nil)
	e = w.next()
	for e.Data.Id != c.Id { // creates that the list's position preceded come first
		require.Equal(t, "created", e.Event, "%s", e.Raw)
		e = w.next()
	}
	require.Equal(t, "created", e.Event)
	require.Equal(t, renewed+"."+strconv.FormatInt(e.Data.Seq, 10), e.ID)
}

// A position beyond the feed's head (a replica that lacks the last commits, a client's invention) is waited for
// during a short grace, since a replica whose feed is just ahead hands out such positions, then refused with 410.
func TestWatchBeyondTheHeadIsGone(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EventsGrace: 300 * time.Millisecond})
	createCluster(t, s, "one", nil)
	epoch, seq, _ := strings.Cut(listPosition(t, s), ".")
	head, err := strconv.ParseInt(seq, 10, 64)
	require.NoError(t, err)

	resp, cancel := openWatch(t, s.base, "/clusters?resource_version="+epoch+"."+strconv.FormatInt(head+100, 10), nil)
	defer cancel()
	p := problem(t, resp, []byte(readAll(t, resp)), http.StatusGone, "HYPERFLEET-WAT-001")
	require.Contains(t, *p.Detail, "beyond")

	// The head itself is a good position.
	w := watch(t, s.base, "/clusters?resource_version="+epoch+"."+seq, nil)
	createCluster(t, s, "two", nil)
	require.Equal(t, "created", w.next().Event)
}
