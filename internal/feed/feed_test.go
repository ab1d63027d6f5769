package feed_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/hyperfleet/hyperfleet/internal/feed"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// env is one database with the change feed running on it as an API process runs it: a sequencer, a listener and
// a feed, until the test ends.
type env struct {
	dsn   string
	store *postgres.Store
	pool  *pgxpool.Pool
	feed  *feed.Feed
}

// startFeed starts the change feed on a new database, with the sequencer's retention and the feed's config as
// given.
func startFeed(tb testing.TB, seq postgres.SequencerConfig, cfg feed.Config) *env {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{dsn: harness.NewDatabase(tb)}
	e.store = postgres.NewStore(harness.OpenGorm(tb, e.dsn), nil)
	var err error
	e.pool, err = postgres.OpenFeedPool(ctx, e.dsn)
	require.NoError(tb, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	seq.Pool, seq.Log = e.pool, log
	seq.Retention = max(seq.Retention, time.Hour)
	seq.MaxEvents = max(seq.MaxEvents, 1)
	sequencer, err := postgres.NewSequencer(seq)
	require.NoError(tb, err)
	notifier := postgres.NewNotifier(e.pool, log)
	e.feed = feed.New(e.store, notifier.C(), cfg)
	require.NoError(tb, e.feed.Start(ctx))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sequencer.Run(gctx) })
	g.Go(func() error { return notifier.Run(gctx) })
	g.Go(func() error { return e.feed.Run(gctx) })
	tb.Cleanup(func() {
		cancel()
		require.NoError(tb, g.Wait())
		e.pool.Close()
	})
	return e
}

// stage stages n events of kind, as n writes would, in one statement.
func (e *env) stage(tb testing.TB, kind string, n int) {
	tb.Helper()
	require.NoError(tb, e.stageErr(context.Background(), kind, n))
}

func (e *env) stageErr(ctx context.Context, kind string, n int) error {
	_, err := e.pool.Exec(ctx, `INSERT INTO event_staging (type, kind, resource_id, generation, version)
		SELECT 'updated', $1, gen_random_uuid(), 1, 1 FROM generate_series(1, $2)`, kind, n)
	return err
}

// head waits until the feed's head is at least seq and returns it.
func (e *env) head(tb testing.TB, seq int64) resource.Position {
	tb.Helper()
	require.Eventually(tb, func() bool { return e.feed.Head().Seq >= seq }, 30*time.Second, 5*time.Millisecond,
		"the feed reaches %d", seq)
	return e.feed.Head()
}

// A reader at the retention edge while compaction runs gets either a contiguous run of events from its position
// on or ErrExpired: never a run that starts later (a silent gap). The read and the retention check were two
// statements, and a compaction that committed between them skipped up to 10,000 events unannounced. The reads go
// through the feed (Next, as watches and the relay read) with almost nothing in memory, so they reach the log.
func TestReadAtTheRetentionEdgeNeverSkips(t *testing.T) {
	e := startFeed(t, postgres.SequencerConfig{MaxEvents: 20, CompactEvery: time.Millisecond, Poll: time.Millisecond},
		feed.Config{Recent: 1})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e.stage(t, "Cluster", 100)
	e.head(t, 100)
	var g errgroup.Group
	g.Go(func() error { // writes keep coming, so compaction keeps moving the edge
		for ctx.Err() == nil {
			if err := e.stageErr(ctx, "Cluster", 5); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	})
	var contiguous, expired int
	for range 3000 {
		through, err := e.store.CompactedThrough(ctx)
		require.NoError(t, err)
		at := resource.Position{Epoch: e.feed.Head().Epoch, Seq: through}
		readCtx, stop := context.WithTimeout(ctx, 10*time.Second)
		events, err := e.feed.Next(readCtx, at, 10)
		stop()
		if errors.Is(err, resource.ErrExpired) {
			expired++
			continue
		}
		require.NoError(t, err)
		require.NotEmpty(t, events)
		for i, ev := range events {
			require.Equal(t, at.Seq+int64(i)+1, ev.Seq, "events after %d: a gap at %d", at.Seq, i)
		}
		contiguous++
	}
	cancel()
	require.NoError(t, g.Wait())
	t.Logf("3000 reads at the retention edge: %d contiguous, %d told expired", contiguous, expired)
}

// A restore (simulated: the events after 50 are gone and the sequence hands their numbers out again) followed by
// `migrate --renew-feed-epoch` tells every reader of the old history so (ErrOtherEpoch, a 410 at the edge), both a
// reader waiting at the head and one that comes back with an old position, even once the new history has passed
// the old numbers; and never serves the new events that reuse them.
func TestRestoredFeedTellsOldPositions(t *testing.T) {
	e := startFeed(t, postgres.SequencerConfig{MaxEvents: 1_000_000}, feed.Config{})
	ctx := t.Context()
	e.stage(t, "Cluster", 100)
	old := e.head(t, 100)
	waiting := make(chan error, 1)
	go func() {
		_, err := e.feed.Next(ctx, old, 10)
		waiting <- err
	}()

	_, err := e.pool.Exec(ctx, `DELETE FROM events WHERE seq > 50`)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `ALTER TABLE events ALTER COLUMN seq RESTART WITH 51`)
	require.NoError(t, err)
	was, renewed, err := postgres.RenewFeedEpoch(ctx, harness.OpenGorm(t, e.dsn))
	require.NoError(t, err)
	require.Equal(t, old.Epoch, was)
	require.NotEqual(t, was, renewed)
	e.stage(t, "Cluster", 100) // numbered 51..150 in the new history
	require.Eventually(t, func() bool { return e.feed.Head() == resource.Position{Epoch: renewed, Seq: 150} },
		30*time.Second, 5*time.Millisecond)

	select {
	case err := <-waiting:
		require.ErrorIs(t, err, resource.ErrOtherEpoch)
		require.ErrorIs(t, err, resource.ErrExpired, "the watch answers it as an expired position: 410")
	case <-time.After(30 * time.Second):
		t.Fatal("a reader waiting at the old head was never told")
	}
	for _, at := range []int64{old.Seq, 80, 10} {
		_, err := e.feed.Next(ctx, resource.Position{Epoch: old.Epoch, Seq: at}, 10)
		require.ErrorIs(t, err, resource.ErrOtherEpoch, "old position %d", at)
		require.ErrorIs(t, e.feed.Check(ctx, resource.Position{Epoch: old.Epoch, Seq: at}), resource.ErrOtherEpoch)
		_, err = e.store.Events(ctx, resource.Position{Epoch: old.Epoch, Seq: at}, 10)
		require.ErrorIs(t, err, resource.ErrOtherEpoch, "the log tells too: old position %d", at)
	}
	events, err := e.feed.Next(ctx, resource.Position{Epoch: renewed, Seq: 50}, 200)
	require.NoError(t, err)
	require.Len(t, events, 100, "the new history is whole")
}

// A position beyond the head (a restore without a renewed epoch, or a client's invention) is waited for during the
// grace, since a replica whose feed is a moment ahead hands out such positions, and refused after it.
func TestPositionBeyondTheHead(t *testing.T) {
	e := startFeed(t, postgres.SequencerConfig{MaxEvents: 1_000_000}, feed.Config{Grace: 200 * time.Millisecond})
	ctx := t.Context()
	e.stage(t, "Cluster", 10)
	head := e.head(t, 10)

	ahead := resource.Position{Epoch: head.Epoch, Seq: head.Seq + 5}
	require.ErrorIs(t, e.feed.Check(ctx, ahead), resource.ErrOtherEpoch)
	_, err := e.feed.Next(ctx, ahead, 10)
	require.ErrorIs(t, err, resource.ErrOtherEpoch)

	// Within the grace, the head catching up makes the position good.
	slightly := resource.Position{Epoch: head.Epoch, Seq: head.Seq + 2}
	long := feed.New(e.store, nil, feed.Config{Grace: time.Minute})
	require.NoError(t, long.Start(ctx))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = long.Run(runCtx) }() //nolint:errcheck // Run returns nil
	checked := make(chan error, 1)
	go func() { checked <- long.Check(ctx, slightly) }()
	e.stage(t, "Cluster", 3)
	require.NoError(t, <-checked)
	events, err := long.Next(ctx, slightly, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, head.Seq+3, events[0].Seq)
}

// A reader interested in one kind keeps its position across many events of another kind while compaction runs:
// it advances past every batch it reads (its own kind or not), and a reader that only takes the feed's head now
// and then (as a watch's bookmark heartbeat does) is never behind retention either.
func TestQuietReaderKeepsItsPosition(t *testing.T) {
	const total = 100_000
	e := startFeed(t, postgres.SequencerConfig{MaxEvents: 2000, CompactEvery: 10 * time.Millisecond}, feed.Config{})
	ctx := t.Context()
	start := e.feed.Head()
	var mu sync.Mutex
	bookmark := start
	stopBookmarks := make(chan struct{})
	var g errgroup.Group
	g.Go(func() error { // a bookmark reader: the head, every few milliseconds
		for {
			select {
			case <-stopBookmarks:
				return nil
			case <-time.After(5 * time.Millisecond):
			}
			mu.Lock()
			bookmark = e.feed.Head()
			mu.Unlock()
		}
	})
	// Writes come in bursts of 1000 with the reader keeping up between them, as a watch does; retention keeps
	// only 2000, so it removes nearly all of them while the reader reads.
	pos, mine := start, 0
	for burst := range int64(total / 1000) {
		e.stage(t, "NodePool", 1000)
		for pos.Seq < start.Seq+(burst+1)*1000 {
			events, err := e.feed.Next(ctx, pos, 500)
			require.NoError(t, err, "the reader at %d", pos.Seq)
			for _, ev := range events {
				if ev.Kind == "Cluster" {
					mine++
				}
			}
			pos.Seq = events[len(events)-1].Seq
		}
	}
	close(stopBookmarks)
	require.NoError(t, g.Wait())
	require.Zero(t, mine)
	require.Equal(t, start.Seq+total, pos.Seq)
	require.NoError(t, e.feed.Check(ctx, pos))
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, e.feed.Check(ctx, bookmark), "the bookmark at %d", bookmark.Seq)
	through, err := e.store.CompactedThrough(ctx)
	require.NoError(t, err)
	require.Greater(t, through, start.Seq+total/2, "compaction ran meanwhile")
	t.Logf("%d events of another kind, compacted through %d; the reader at %d, the bookmark at %d", total, through, pos.Seq, bookmark.Seq)
}
