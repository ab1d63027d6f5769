package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/test/harness"
)

// `migrate --renew-feed-epoch` gives the change feed a new epoch (after a restore or a failover); a plain migrate
// leaves it.
func TestMigrateRenewsTheFeedEpoch(t *testing.T) {
	dsn := harness.NewDatabase(t)
	db := harness.OpenGorm(t, dsn)
	epoch := func() string {
		t.Helper()
		var e string
		require.NoError(t, db.Raw("SELECT epoch FROM event_feed WHERE id = 1").Scan(&e).Error)
		require.Len(t, e, 16)
		return e
	}
	before := epoch()
	require.NoError(t, run(t, "migrate", "--db-url", dsn))
	require.Equal(t, before, epoch(), "a plain migrate keeps the epoch")
	require.NoError(t, run(t, "migrate", "--db-url", dsn, "--renew-feed-epoch"))
	require.NotEqual(t, before, epoch())
}
