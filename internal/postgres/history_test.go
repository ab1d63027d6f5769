package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// Pruning removes exactly the entries older than the retention, in as many batches as it takes, and only the
// process holding the pruner's lease prunes.
func TestHistoryPruneKeepsWhatRetentionKeeps(t *testing.T) {
	dsn := harness.NewDatabase(t)
	db := harness.OpenGorm(t, dsn)
	// More old entries than one batch removes, a few just inside the retention, and new ones.
	insert := func(n int, age time.Duration) {
		t.Helper()
		require.NoError(t, db.Exec(`INSERT INTO resource_history (tenant, kind, resource_id, time, actor, action, generation)
			SELECT 'default', 'Cluster', gen_random_uuid(), now() - make_interval(secs => ?), 'test', 'updated', i
			FROM generate_series(1, ?) AS i`, age.Seconds(), n).Error)
	}
	insert(10_050, 48*time.Hour)
	insert(7, 23*time.Hour)
	insert(3, 0)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := postgres.OpenFeedPool(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	newPruner := func() *postgres.HistoryPruner {
		p, err := postgres.NewHistoryPruner(postgres.HistoryPrunerConfig{Pool: pool, Retention: 24 * time.Hour,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		return p
	}
	leader, other := newPruner(), newPruner()
	n, err := leader.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(10_050), n)
	var left int64
	require.NoError(t, db.Raw(`SELECT count(*) FROM resource_history`).Scan(&left).Error)
	require.Equal(t, int64(10), left)

	insert(5, 48*time.Hour)
	_, err = other.Prune(ctx)
	require.True(t, errors.Is(err, postgres.ErrLeaseLost), "a second process prunes while the first holds the lease: %v", err)
	n, err = leader.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)

	_, err = postgres.NewHistoryPruner(postgres.HistoryPrunerConfig{Pool: pool})
	require.Error(t, err, "a pruner without a retention")
}
