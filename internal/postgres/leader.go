package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leader elects one process per database for a job with a session-level advisory lock on a session of its own:
// the lock is released when the session ends, a crash included, so another process takes over within seconds.
type Leader struct {
	dsn string
	key int64
}

// NewLeader returns a leader election on lock key.
func NewLeader(dsn string, key int64) *Leader { return &Leader{dsn: dsn, key: key} }

// natsRelayLockKey elects the process whose NATS relay publishes.
const natsRelayLockKey = 0x48464e52 // "HFNR"

// NewNATSRelayLeader elects the process whose NATS relay publishes.
func NewNATSRelayLeader(dsn string) *Leader { return NewLeader(dsn, natsRelayLockKey) }

// Lead runs fn while this process holds the lock, and returns at once (nil) when another one holds it. fn's
// context ends when the session that holds the lock fails, since the lock is then gone.
func (l *Leader) Lead(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.LeadOn(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		leadCtx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			tick := time.NewTicker(5 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-leadCtx.Done():
					return
				case <-tick.C:
					if err := conn.Ping(leadCtx); err != nil && leadCtx.Err() == nil {
						cancel(fmt.Errorf("the session holding the lock failed: %w", err))
						return
					}
				}
			}
		}()
		err := fn(leadCtx)
		if cause := context.Cause(leadCtx); err != nil && cause != nil && ctx.Err() == nil {
			return cause
		}
		return err
	})
}

// LeadOn is Lead for a job that works on the session holding the lock (LISTEN, say): fn has it to itself (a
// pgx.Conn is not safe for concurrent use, so nothing pings it meanwhile) and learns of its failure from its own
// statements.
func (l *Leader) LeadOn(ctx context.Context, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var held bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&held); err != nil {
		return fmt.Errorf("take the lock: %w", err)
	}
	if !held {
		return nil
	}
	return fn(ctx, conn)
}

// RelayPosition returns the last sequence the named relay had acknowledged, 0 for none.
func (s *Store) RelayPosition(ctx context.Context, name string) (int64, error) {
	var seq []int64
	if err := rawScan(s.db.WithContext(ctx).Raw("SELECT seq FROM event_relays WHERE name = ?", name), &seq); err != nil {
		return 0, fmt.Errorf("read the position of relay %s: %w", name, err)
	}
	if len(seq) == 0 {
		return 0, nil
	}
	return seq[0], nil
}

// SetRelayPosition records the last sequence the named relay had acknowledged.
func (s *Store) SetRelayPosition(ctx context.Context, name string, seq int64) error {
	err := s.db.WithContext(ctx).Exec(`INSERT INTO event_relays (name, seq, updated_time) VALUES (?, ?, now())
		ON CONFLICT (name) DO UPDATE SET seq = EXCLUDED.seq, updated_time = now()`, name, seq).Error
	if err != nil {
		return fmt.Errorf("record the position of relay %s: %w", name, err)
	}
	return nil
}
