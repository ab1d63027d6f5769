package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/server"
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

// Only migrate writes the required adapters: serve refuses a database where they were never set, whether it is
// given them or not, and one given others than the database's; `--required-adapters ”` sets none.
func TestDeployMigrateIsTheOnlyWriterOfRequiredAdapters(t *testing.T) {
	dsn := harness.NewDatabase(t)
	db := harness.OpenGorm(t, dsn)
	serve := func(args ...string) error {
		return run(t, append([]string{"serve", "--db-url", dsn, "--api-server-bindaddress", "127.0.0.1:0",
			"--health-server-bindaddress", "127.0.0.1:0", "--metrics-server-bindaddress", "127.0.0.1:0"}, args...)...)
	}
	stored := func() postgres.RequiredAdapters {
		t.Helper()
		r, err := postgres.LoadRequiredAdapters(t.Context(), db)
		require.NoError(t, err)
		return r
	}

	require.NoError(t, run(t, "migrate", "--db-url", dsn))
	for _, args := range [][]string{nil, {"--required-adapters", "cluster=applier"}} {
		err := serve(args...)
		require.ErrorIs(t, err, server.ErrRequiredAdaptersUnset)
		require.ErrorContains(t, err, "hyperfleet-api migrate --required-adapters")
		require.Nil(t, stored(), "serve %v wrote the required adapters", args)
	}

	require.NoError(t, run(t, "migrate", "--db-url", dsn, "--required-adapters", "cluster=applier"))
	require.Equal(t, []string{"applier"}, stored()["Cluster"])
	require.ErrorIs(t, serve("--required-adapters", "cluster=other"), server.ErrRequiredAdapters)
	require.Equal(t, []string{"applier"}, stored()["Cluster"], "a refused serve changes nothing")

	require.NoError(t, run(t, "migrate", "--db-url", dsn, "--required-adapters", ""))
	require.NotNil(t, stored(), "none is set, not unset")
	require.True(t, stored().Equal(postgres.RequiredAdapters{}))
}
