package postgres

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultLeaseTTL is how long a lease outlives its holder's last renewal: the longest the others wait when the
// holder is lost without releasing it (a crash, a frozen connection, a partition). Holders renew five times per TTL.
const DefaultLeaseTTL = 10 * time.Second

// ErrLeaseLost is returned by a job whose lease another process took: it was not renewed in time.
var ErrLeaseLost = errors.New("the lease was lost to another process")

// Lease elects one process per database for a job with a row of feed_leases: the holder renews its expiry, and
// another process takes the row once it has expired. Unlike a session advisory lock, which PostgreSQL frees only
// when it notices the holder's session is gone (hours, with a frozen connection or a partitioned node), the expiry
// is the database's own clock, so takeover takes at most a TTL and a retry. Trying and renewing are single
// statements on the change feed's pool, so processes that do not lead hold no session of their own.
type Lease struct {
	pool   *pgxpool.Pool
	name   string
	holder string
	ttl    time.Duration
}

// NewLease returns the lease name on pool, held for ttl (DefaultLeaseTTL when 0) after each renewal. Each Lease is
// its own holder.
func NewLease(pool *pgxpool.Pool, name string, ttl time.Duration) *Lease {
	host, _ := os.Hostname() //nolint:errcheck // only a readable prefix of the holder's id
	id := make([]byte, 8)
	_, _ = rand.Read(id) //nolint:errcheck // crypto/rand.Read never fails (Go 1.24+)
	return &Lease{pool: pool, name: name, holder: host + "/" + hex.EncodeToString(id), ttl: cmp.Or(ttl, DefaultLeaseTTL)}
}

// natsRelayLease elects the process whose NATS relay publishes.
const natsRelayLease = "nats-relay"

// NewNATSRelayLeader elects the process whose NATS relay publishes.
func NewNATSRelayLeader(pool *pgxpool.Pool) *Lease { return NewLease(pool, natsRelayLease, 0) }

// retry is how long a process that does not lead waits before trying again.
func (l *Lease) retry() time.Duration { return l.ttl / 5 }

// LeadUntilDone runs fn whenever it holds the lease, and tries to take the lease again after a retry interval
// otherwise, until ctx ends. stopped, when not nil, is called each time fn stops; log gets fn's failures, as
// "<what> stopped; retrying".
func (l *Lease) LeadUntilDone(ctx context.Context, fn func(ctx context.Context) error, stopped func(), log *slog.Logger, what string) {
	for ctx.Err() == nil {
		err := l.Lead(ctx, fn)
		if stopped != nil {
			stopped()
		}
		if err != nil && ctx.Err() == nil {
			log.Warn(what+" stopped; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.retry()):
		}
	}
}

// fenceSQL is a query that locks the lease's row and returns it only while holder (a placeholder) holds it
// unexpired: a statement that works only when it returns a row is fenced by the lease.
func (l *Lease) fenceSQL(name, holder string) string {
	return `SELECT 1 FROM feed_leases WHERE name = ` + name + ` AND holder = ` + holder + ` AND expires > now() FOR UPDATE`
}

// Lead runs fn while this process holds the lease, and returns at once (nil) when another one holds it. fn's
// context ends when the lease could not be renewed before it would expire, so that fn stops before another
// process may start; on return the lease is released, so another takes over at once.
func (l *Lease) Lead(ctx context.Context, fn func(ctx context.Context) error) error {
	held, err := l.take(ctx)
	if err != nil || !held {
		return err
	}
	// validUntil is measured from when the last successful renewal was sent, on this process's monotonic clock:
	// the database's expiry is later still.
	validUntil := time.Now().Add(l.ttl)
	leadCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(l.ttl / 5)
		defer tick.Stop()
		for {
			select {
			case <-leadCtx.Done():
				return
			case <-tick.C:
			}
			sent := time.Now()
			renewCtx, stop := context.WithTimeout(leadCtx, l.ttl/5)
			held, err := l.renew(renewCtx)
			stop()
			switch {
			case err == nil && held:
				validUntil = sent.Add(l.ttl)
			case err == nil:
				cancel(ErrLeaseLost)
				return
			case time.Until(validUntil) < l.ttl/5:
				// The next renewal could not come in time: stop before the lease may pass to another process.
				cancel(fmt.Errorf("%w: renewing failed since %s: %w", ErrLeaseLost, validUntil.Add(-l.ttl).Format(time.RFC3339), err))
				return
			}
		}
	}()
	err = fn(leadCtx)
	cancel(nil)
	<-done
	releaseCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), l.ttl/5)
	defer stop()
	_, _ = l.pool.Exec(releaseCtx, `UPDATE feed_leases SET expires = now() WHERE name = $1 AND holder = $2`, l.name, l.holder) //nolint:errcheck // a lease not released expires
	if cause := context.Cause(leadCtx); cause != nil && !errors.Is(cause, context.Canceled) && ctx.Err() == nil {
		return cause
	}
	return err
}

// take takes the lease if it is free, expired or this holder's.
func (l *Lease) take(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/5)
	defer cancel()
	err := l.pool.QueryRow(ctx, `INSERT INTO feed_leases (name, holder, expires) VALUES ($1, $2, now() + make_interval(secs => $3))
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
		WHERE feed_leases.expires <= now() OR feed_leases.holder = EXCLUDED.holder
		RETURNING true`, l.name, l.holder, l.ttl.Seconds()).Scan(new(bool))
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take lease %s: %w", l.name, err)
	}
	return true, nil
}

// renew extends the lease while this holder has it; false means another process took it.
func (l *Lease) renew(ctx context.Context) (bool, error) {
	tag, err := l.pool.Exec(ctx, `UPDATE feed_leases SET expires = now() + make_interval(secs => $3) WHERE name = $1 AND holder = $2`,
		l.name, l.holder, l.ttl.Seconds())
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", l.name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// OpenFeedPool opens the change feed's own small pool of sessions (the sequencer's, the leases', the listener's),
// apart from the requests' pool so that a burst of requests cannot starve a lease's renewal. Its sessions ask for
// TCP keepalives and a TCP user timeout on both ends, so that a dead peer is noticed in seconds rather than
// hours: the client's end fails the session's statements, the server's end ends the session. A session that froze
// between a statement and its Sync (its transaction open, the lease row locked) is ended by the server after 10 s
// idle in that transaction, so that it cannot block a takeover either.
func OpenFeedPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("change feed pool: %w", err)
	}
	cfg.MaxConns = 4
	cfg.MinConns = 0
	cfg.HealthCheckPeriod = 5 * time.Second
	for k, v := range map[string]int{"tcp_keepalives_idle": 5, "tcp_keepalives_interval": 2, "tcp_keepalives_count": 3,
		"tcp_user_timeout": 10000, "idle_in_transaction_session_timeout": 10000} {
		cfg.ConnConfig.RuntimeParams[k] = strconv.Itoa(v)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second,
		Interval: 2 * time.Second, Count: 3}}
	cfg.ConnConfig.DialFunc = dialer.DialContext
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("change feed pool: %w", err)
	}
	return pool, nil
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
