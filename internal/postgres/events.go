package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// eventsChannel is the change feed's one notification: the sequencer sends it once per batch it numbers, and it
// wakes every API process's feed. Writes send none (a NOTIFY in a write transaction takes PostgreSQL's one
// database-wide notify lock at commit, which serialised every write): the sequencer polls for them instead, and
// the process that wrote pokes its own sequencer in memory.
const eventsChannel = "hyperfleet_events"

// sequencerLease elects the one process whose sequencer runs.
const sequencerLease = "sequencer"

// legacySequencerLock is the session advisory lock that elected the sequencer before the lease. Each sequencing
// statement also takes it for its transaction, so that during a rolling upgrade an old replica's sequencer, which
// holds it for its session, and a new one's never number at once.
const legacySequencerLock = 0x48465351 // "HFSQ"

var _ resource.EventLog = (*Store)(nil)

// feedRow is one event as read with the feed's epoch and retention in one snapshot; the event's columns are null
// when there is none after the position.
type feedRow struct {
	Epoch            string
	CompactedThrough int64
	Seq              *int64
	Time             *time.Time
	Type             *string
	Kind             *string
	ResourceID       *string
	ParentID         *string
	Generation       *int64
	Version          *int64
	Tenant           *string
}

// Events implements resource.EventLog. The events, the epoch and how far retention got are read by one statement,
// so in one snapshot: a compaction that commits meanwhile is either wholly seen (and the position reported
// expired) or not at all (and the events it removes are still read), never half, which would skip events silently.
func (s *Store) Events(ctx context.Context, after resource.Position, limit int) ([]resource.Event, error) {
	var rows []feedRow
	err := rawScan(s.db.WithContext(ctx).Raw(`SELECT f.epoch, f.compacted_through, e.seq, e.time, e.type, e.kind,
			e.resource_id, e.parent_id, e.generation, e.version, e.tenant
		FROM event_feed f LEFT JOIN LATERAL (
			SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?) e ON true
		WHERE f.id = 1 ORDER BY e.seq`, after.Seq, limit), &rows)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("read events: the change feed's row is missing (run `hyperfleet-api migrate`)")
	}
	if err := checkPosition(after, rows[0].Epoch, rows[0].CompactedThrough); err != nil {
		return nil, err
	}
	out := make([]resource.Event, 0, len(rows))
	for _, r := range rows {
		if r.Seq == nil {
			continue
		}
		e := resource.Event{Seq: *r.Seq, Time: r.Time.UTC(), Type: resource.EventType(*r.Type), Kind: *r.Kind, ID: *r.ResourceID,
			Generation: *r.Generation, Version: *r.Version}
		if r.Tenant != nil {
			e.Tenant = *r.Tenant
		}
		if r.ParentID != nil {
			e.ParentID = *r.ParentID
		}
		out = append(out, e)
	}
	return out, nil
}

// checkPosition returns resource.ErrExpired (wrapped) if a reader at after has missed events of a feed at epoch
// whose retention removed events up to compacted.
func checkPosition(after resource.Position, epoch string, compacted int64) error {
	if after.Epoch != epoch {
		return fmt.Errorf("%w: position of epoch %q, the feed's is %q", resource.ErrOtherEpoch, after.Epoch, epoch)
	}
	if after.Seq < compacted {
		return fmt.Errorf("%w: position %d, events up to %d were removed", resource.ErrExpired, after.Seq, compacted)
	}
	return nil
}

// Head implements resource.EventLog. Retention never lowers it: with every event compacted away, the head is
// where compaction got to.
func (s *Store) Head(ctx context.Context) (resource.Position, error) {
	var head []struct {
		Epoch string
		Seq   int64
	}
	err := rawScan(s.db.WithContext(ctx).Raw(`SELECT epoch, greatest((SELECT coalesce(max(seq), 0) FROM events),
		compacted_through) AS seq FROM event_feed WHERE id = 1`), &head)
	if err != nil {
		return resource.Position{}, fmt.Errorf("read the head of the change feed: %w", err)
	}
	if len(head) == 0 {
		return resource.Position{}, errors.New("read the head of the change feed: its row is missing (run `hyperfleet-api migrate`)")
	}
	return resource.Position{Epoch: head[0].Epoch, Seq: head[0].Seq}, nil
}

// CompactedThrough implements resource.EventLog.
func (s *Store) CompactedThrough(ctx context.Context) (int64, error) {
	var through int64
	if err := rawScan(s.db.WithContext(ctx).Raw(`SELECT compacted_through FROM event_feed WHERE id = 1`), &through); err != nil {
		return 0, fmt.Errorf("read the change feed's retention: %w", err)
	}
	return through, nil
}

// RenewFeedEpoch gives the change feed a new random epoch and returns the old and the new one. Run it (hyperfleet-api
// migrate --renew-feed-epoch) after restoring the database or failing over to a replica that may lack commits:
// sequence numbers are then handed out again, and every position of the old epoch must be told to list again
// rather than skip the new events that reuse its numbers.
func RenewFeedEpoch(ctx context.Context, db *gorm.DB) (old, renewed string, err error) {
	var epochs []struct{ Old, New string }
	err = rawScan(db.WithContext(ctx).Raw(`UPDATE event_feed f SET epoch = `+newEpochSQL+`
		FROM (SELECT epoch FROM event_feed WHERE id = 1 FOR UPDATE) AS before
		WHERE f.id = 1 RETURNING before.epoch AS old, f.epoch AS new`), &epochs)
	if err != nil {
		return "", "", fmt.Errorf("renew the change feed's epoch: %w", err)
	}
	if len(epochs) == 0 {
		return "", "", errors.New("renew the change feed's epoch: its row is missing (run `hyperfleet-api migrate`)")
	}
	return epochs[0].Old, epochs[0].New, nil
}

// newEpochSQL makes a random epoch: 16 hex digits (64 bits), short enough for every position to carry.
const newEpochSQL = `left(replace(gen_random_uuid()::text, '-', ''), 16)`

// SequencerConfig tunes the sequencer.
type SequencerConfig struct {
	// Pool holds the change feed's own sessions (OpenFeedPool), apart from the requests' pool.
	Pool *pgxpool.Pool
	// Retention and MaxEvents bound the events kept: older or further behind the head, they are removed.
	Retention time.Duration
	MaxEvents int64
	// CompactEvery is how often retention runs (default 30 s).
	CompactEvery time.Duration
	// Poll is how often the leading sequencer looks for events staged by other processes (default 50 ms); this
	// process's writes wake it at once (Poke).
	Poll time.Duration
	// LeaseTTL bounds how long a lost leader blocks the others (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	Log      *slog.Logger
	// Registerer, when not nil, gets the sequencer's metrics.
	Registerer prometheus.Registerer
}

// Sequencer moves committed staged events into the change feed, numbering them in the order it finds them, and
// applies retention. Every API process runs one; a lease (Lease) lets exactly one work at a time, and another
// takes over within the lease's TTL when that one is lost (a crash, a frozen connection, a partition).
type Sequencer struct {
	cfg   SequencerConfig
	lease *Lease
	poke  chan struct{}
	// legacyWait is true while an older replica's sequencer holds the advisory lock (used by lead's goroutine only).
	legacyWait bool
	sequenced  prometheus.Counter
	compacted  prometheus.Counter
	leader     prometheus.Gauge
}

// NewSequencer returns a sequencer; Run runs it.
func NewSequencer(cfg SequencerConfig) (*Sequencer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("the sequencer needs the change feed's pool")
	}
	q := &Sequencer{
		cfg:   cfg,
		lease: NewLease(cfg.Pool, sequencerLease, cfg.LeaseTTL),
		poke:  make(chan struct{}, 1),
		sequenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_events_written_total",
			Help: "Events this process's sequencer added to the change feed."}),
		compacted: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_events_compacted_total",
			Help: "Events this process's sequencer removed for retention."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperfleet_events_sequencer_leader",
			Help: "1 while this process's sequencer holds the lease and works."}),
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

// Poke tells the sequencer that this process committed staged events, so that it numbers them now rather than at
// its next poll. It never blocks; pokes coalesce, and one to a sequencer that is not leading is dropped.
func (q *Sequencer) Poke() {
	select {
	case q.poke <- struct{}{}:
	default:
	}
}

// Run works while it holds the lease and tries to take it otherwise, until ctx ends.
func (q *Sequencer) Run(ctx context.Context) error {
	q.lease.LeadUntilDone(ctx, q.lead, func() { q.leader.Set(0) }, q.cfg.Log, "change feed sequencer")
	return nil
}

// lead sequences while the lease holds, until ctx ends.
func (q *Sequencer) lead(ctx context.Context) error {
	q.leader.Set(1)
	q.cfg.Log.Info("change feed sequencer leading", "holder", q.lease.holder)
	nextCompaction := time.Now()
	poll := time.NewTicker(cmp.Or(q.cfg.Poll, 50*time.Millisecond))
	defer poll.Stop()
	for {
		// Move everything committed so far, then wait for a poke from this process's writes or the next poll.
		for {
			n, err := q.sequence(ctx)
			if err != nil {
				return err
			}
			if n < sequenceBatch {
				break
			}
		}
		if time.Now().After(nextCompaction) {
			if err := q.compact(ctx); err != nil {
				return err
			}
			nextCompaction = time.Now().Add(cmp.Or(q.cfg.CompactEvery, 30*time.Second))
		}
		moved := time.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-q.poke:
			// Under write load a poke comes with every write: moving at most once per pokeGap numbers a burst in
			// one statement and wakes the feeds once, instead of a move, a notification and a catch-up of every
			// feed per write.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(moved.Add(pokeGap))):
			}
		case <-poll.C:
		}
	}
}

// pokeGap is the least time between two moves that pokes asked for: what a watcher may wait longer for an event.
const pokeGap = 5 * time.Millisecond

// sequenceBatch bounds one move, so that a burst is numbered in several short transactions.
const sequenceBatch = 1000

// sequence moves up to sequenceBatch committed staged events into events, in staging order, and wakes the feeds
// with one notification. The statement locks the lease's row and moves nothing unless this sequencer still holds
// it: a statement of a lost leader that reaches the database late (a connection that was frozen) does nothing, and
// two sequencers never number at once, which could commit a lower number after a higher one.
func (q *Sequencer) sequence(ctx context.Context) (int, error) {
	var n int
	var held, alone bool
	err := q.cfg.Pool.QueryRow(ctx, `WITH lease AS (`+q.lease.fenceSQL("$3", "$4")+`),
		legacy AS (SELECT pg_try_advisory_xact_lock($5) AS alone),
		moved AS (
			DELETE FROM event_staging WHERE EXISTS (SELECT 1 FROM lease) AND (SELECT alone FROM legacy)
				AND id IN (SELECT id FROM event_staging ORDER BY id LIMIT $1)
			RETURNING id, time, type, kind, resource_id, parent_id, generation, version, tenant
		), added AS (
			INSERT INTO events (time, type, kind, resource_id, parent_id, generation, version, tenant)
			SELECT time, type, kind, resource_id, parent_id, generation, version, tenant FROM moved ORDER BY id
			RETURNING seq
		)
		SELECT EXISTS (SELECT 1 FROM lease), (SELECT alone FROM legacy), n,
			CASE WHEN n > 0 THEN pg_notify($2, head::text) END IS NULL
		FROM (SELECT count(*) AS n, max(seq) AS head FROM added) AS batch`,
		sequenceBatch, eventsChannel, q.lease.name, q.lease.holder, legacySequencerLock).Scan(&held, &alone, &n, new(bool))
	if err != nil {
		return 0, fmt.Errorf("sequence staged events: %w", err)
	}
	if !held {
		return 0, ErrLeaseLost
	}
	if !alone {
		if !q.legacyWait {
			q.cfg.Log.Warn("an older replica's sequencer holds the advisory lock; waiting for it to stop (a rolling upgrade)")
		}
		q.legacyWait = true
		return 0, nil
	}
	q.legacyWait = false
	q.sequenced.Add(float64(n))
	return n, nil
}

// compact removes events beyond retention, oldest first, and records how far it got, in the same statement: a
// reader sees both or neither. Like sequence, it works only while the lease holds.
func (q *Sequencer) compact(ctx context.Context) error {
	for {
		var n int64
		var held bool
		err := q.cfg.Pool.QueryRow(ctx, `WITH lease AS (`+q.lease.fenceSQL("$3", "$4")+`),
			head AS (SELECT coalesce(max(seq), 0) AS seq FROM events),
			gone AS (
				DELETE FROM events WHERE EXISTS (SELECT 1 FROM lease) AND seq IN (
					SELECT events.seq FROM events, head
					WHERE events.seq <= head.seq - $1 OR events.time < now() - make_interval(secs => $2)
					ORDER BY seq LIMIT 10000)
				RETURNING seq
			), moved AS (
				UPDATE event_feed SET compacted_through = greatest(compacted_through, (SELECT max(seq) FROM gone))
				WHERE id = 1 AND EXISTS (SELECT 1 FROM gone)
			)
			SELECT EXISTS (SELECT 1 FROM lease), count(*) FROM gone`,
			q.cfg.MaxEvents, q.cfg.Retention.Seconds(), q.lease.name, q.lease.holder).Scan(&held, &n)
		if err != nil {
			return fmt.Errorf("compact the change feed: %w", err)
		}
		if !held {
			return ErrLeaseLost
		}
		q.compacted.Add(float64(n))
		if n < 10000 {
			return nil
		}
	}
}

// Notifier wakes this process's feed when the sequencer has added events, over a session of the feed's pool that
// it takes again when it fails.
type Notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	wake chan struct{}
}

// NewNotifier returns a notifier listening on a session of pool (OpenFeedPool); C is its wake-up channel, Run
// runs it.
func NewNotifier(pool *pgxpool.Pool, log *slog.Logger) *Notifier {
	return &Notifier{pool: pool, log: log, wake: make(chan struct{}, 1)}
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
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	// The session is closed rather than returned: it listens, and a pooled session must not.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n.signal() // events may have come while the session was down
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
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
