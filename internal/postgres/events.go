package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Channels of the change feed: a write's commit wakes the sequencer, which wakes every API process's feed.
const (
	stagedChannel = "hyperfleet_staged"
	eventsChannel = "hyperfleet_events"
)

// sequencerLockKey elects the one process whose sequencer runs.
const sequencerLockKey = 0x48465351 // "HFSQ"

var _ resource.EventLog = (*Store)(nil)

type eventRow struct {
	Seq        int64
	Time       time.Time
	Type       string
	Kind       string
	ResourceID string
	ParentID   *string
	Generation int64
	Version    int64
}

// Events implements resource.EventLog.
func (s *Store) Events(ctx context.Context, after int64, limit int) ([]resource.Event, error) {
	var rows []eventRow
	err := rawScan(s.db.WithContext(ctx).Raw(`SELECT seq, time, type, kind, resource_id, parent_id, generation, version
		FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit), &rows)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	out := make([]resource.Event, len(rows))
	for i, r := range rows {
		out[i] = resource.Event{Seq: r.Seq, Time: r.Time.UTC(), Type: resource.EventType(r.Type), Kind: r.Kind, ID: r.ResourceID,
			Generation: r.Generation, Version: r.Version}
		if r.ParentID != nil {
			out[i].ParentID = *r.ParentID
		}
	}
	return out, nil
}

// Head implements resource.EventLog. Retention never lowers it: with every event compacted away, the head is
// where compaction got to.
func (s *Store) Head(ctx context.Context) (int64, error) {
	var head int64
	err := rawScan(s.db.WithContext(ctx).Raw(`SELECT greatest((SELECT coalesce(max(seq), 0) FROM events),
		(SELECT compacted_through FROM event_feed WHERE id = 1))`), &head)
	if err != nil {
		return 0, fmt.Errorf("read the head of the change feed: %w", err)
	}
	return head, nil
}

// CompactedThrough implements resource.EventLog.
func (s *Store) CompactedThrough(ctx context.Context) (int64, error) {
	var through int64
	if err := rawScan(s.db.WithContext(ctx).Raw(`SELECT compacted_through FROM event_feed WHERE id = 1`), &through); err != nil {
		return 0, fmt.Errorf("read the change feed's retention: %w", err)
	}
	return through, nil
}

// SequencerConfig tunes the sequencer.
type SequencerConfig struct {
	// DSN connects the sequencer's own session, which holds the leader lock and listens.
	DSN string
	// Retention and MaxEvents bound the events kept: older or further behind the head, they are removed.
	Retention time.Duration
	MaxEvents int64
	// CompactEvery is how often retention runs (default 30 s).
	CompactEvery time.Duration
	Log          *slog.Logger
	// Registerer, when not nil, gets the sequencer's metrics.
	Registerer prometheus.Registerer
}

// Sequencer moves committed staged events into the change feed, numbering them in the order it finds them, and
// applies retention. Every API process runs one; a session-level advisory lock lets exactly one work at a time,
// and another takes over within seconds when that one's session ends (a crash included).
type Sequencer struct {
	cfg       SequencerConfig
	sequenced prometheus.Counter
	compacted prometheus.Counter
	leader    prometheus.Gauge
}

// NewSequencer returns a sequencer; Run runs it.
func NewSequencer(cfg SequencerConfig) (*Sequencer, error) {
	q := &Sequencer{
		cfg: cfg,
		sequenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_events_written_total",
			Help: "Events this process's sequencer added to the change feed."}),
		compacted: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_events_compacted_total",
			Help: "Events this process's sequencer removed for retention."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperfleet_events_sequencer_leader",
			Help: "1 while this process's sequencer holds the lock and works."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{q.sequenced, q.compacted, q.leader} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register sequencer metrics: %w", err)
			}
		}
	}
	return q, nil
}

// Run works while it holds the lock and waits for it otherwise, until ctx ends.
func (q *Sequencer) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := NewLeader(q.cfg.DSN, sequencerLockKey).LeadOn(ctx, q.lead)
		q.leader.Set(0)
		if err != nil && ctx.Err() == nil {
			q.cfg.Log.Warn("change feed sequencer stopped; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	return nil
}

// lead sequences on conn, the session holding the lock, until the session fails or ctx ends.
func (q *Sequencer) lead(ctx context.Context, conn *pgx.Conn) error {
	q.leader.Set(1)
	q.cfg.Log.Info("change feed sequencer leading")
	if _, err := conn.Exec(ctx, "LISTEN "+stagedChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	nextCompaction := time.Now()
	for {
		// Move everything committed so far, then wait for the next commit (or a second, in case a
		// notification was lost with a connection).
		for {
			n, err := q.sequence(ctx, conn)
			if err != nil {
				return err
			}
			if n < sequenceBatch {
				break
			}
		}
		if time.Now().After(nextCompaction) {
			if err := q.compact(ctx, conn); err != nil {
				return err
			}
			nextCompaction = time.Now().Add(cmp.Or(q.cfg.CompactEvery, 30*time.Second))
		}
		waitCtx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := conn.WaitForNotification(waitCtx)
		cancel()
		select {
		case <-ctx.Done():
			return nil // shutting down: the wait's error is only that
		default:
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("wait for staged events: %w", err)
		}
	}
}

// sequenceBatch bounds one move, so that a burst is numbered in several short transactions.
const sequenceBatch = 1000

// sequence moves up to sequenceBatch committed staged events into events, in staging order, and wakes the feeds.
func (q *Sequencer) sequence(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `WITH moved AS (
			DELETE FROM event_staging WHERE id IN (SELECT id FROM event_staging ORDER BY id LIMIT $1)
			RETURNING id, time, type, kind, resource_id, parent_id, generation, version
		), added AS (
			INSERT INTO events (time, type, kind, resource_id, parent_id, generation, version)
			SELECT time, type, kind, resource_id, parent_id, generation, version FROM moved ORDER BY id
			RETURNING seq
		)
		SELECT n, CASE WHEN n > 0 THEN pg_notify($2, head::text) END IS NULL
		FROM (SELECT count(*) AS n, max(seq) AS head FROM added) AS batch`, sequenceBatch, eventsChannel).Scan(&n, new(bool))
	if err != nil {
		return 0, fmt.Errorf("sequence staged events: %w", err)
	}
	q.sequenced.Add(float64(n))
	return n, nil
}

// compact removes events beyond retention, oldest first, and records how far it got.
func (q *Sequencer) compact(ctx context.Context, conn *pgx.Conn) error {
	for {
		var n int64
		err := conn.QueryRow(ctx, `WITH head AS (SELECT coalesce(max(seq), 0) AS seq FROM events),
			gone AS (
				DELETE FROM events WHERE seq IN (
					SELECT events.seq FROM events, head
					WHERE events.seq <= head.seq - $1 OR events.time < now() - make_interval(secs => $2)
					ORDER BY seq LIMIT 10000)
				RETURNING seq
			), moved AS (
				UPDATE event_feed SET compacted_through = greatest(compacted_through, (SELECT max(seq) FROM gone))
				WHERE id = 1 AND EXISTS (SELECT 1 FROM gone)
			)
			SELECT count(*) FROM gone`, q.cfg.MaxEvents, q.cfg.Retention.Seconds()).Scan(&n)
		if err != nil {
			return fmt.Errorf("compact the change feed: %w", err)
		}
		q.compacted.Add(float64(n))
		if n < 10000 {
			return nil
		}
	}
}

// Notifier wakes this process's feed when the sequencer has added events, over a session of its own that it
// re-opens when it fails.
type Notifier struct {
	dsn  string
	log  *slog.Logger
	wake chan struct{}
}

// NewNotifier returns a notifier; C is its wake-up channel, Run runs it.
func NewNotifier(dsn string, log *slog.Logger) *Notifier {
	return &Notifier{dsn: dsn, log: log, wake: make(chan struct{}, 1)}
}

// C is signalled (without blocking, so wake-ups coalesce) on every batch of new events.
func (n *Notifier) C() <-chan struct{} { return n.wake }

// Run listens until ctx ends.
func (n *Notifier) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := n.listen(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("change feed listener failed; reconnecting", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

func (n *Notifier) listen(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, n.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n.signal() // events may have come while the session was down
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		n.signal()
	}
}

func (n *Notifier) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}
