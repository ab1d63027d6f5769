package integration

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/postgres"
	"github.com/hyperfleet/hyperfleet/pkg/server"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	dsn := harness.NewDatabase(t)
	db := harness.OpenGorm(t, dsn)
	ctx := ctxFor(t)
	// Start from an empty schema, as a new production database would.
	require.NoError(t, db.Exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public").Error)
	require.ErrorIs(t, postgres.CheckSchema(ctx, db), postgres.ErrSchemaOutdated)

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			other := harness.OpenGorm(t, dsn)
			errs <- postgres.Migrate(ctx, other)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, postgres.Migrate(ctx, db), "again is a no-op")
	require.NoError(t, postgres.CheckSchema(ctx, db))
	var applied int64
	require.NoError(t, db.Raw("SELECT count(*) FROM schema_migrations").Scan(&applied).Error)
	require.Positive(t, applied)
}

func TestServeRefusesAnOutdatedSchema(t *testing.T) {
	dsn := harness.NewDatabase(t)
	db := harness.OpenGorm(t, dsn)
	require.NoError(t, db.Exec("DELETE FROM schema_migrations").Error)
	_, err := server.New(context.Background(), server.Config{
		Env: server.EnvIntegrationTesting, APIBindAddress: "127.0.0.1:0", HealthBindAddress: "127.0.0.1:0",
		MetricsBindAddress: "127.0.0.1:0", MaxBodyBytes: 1 << 20, DB: server.DBConfig{URL: dsn, SSLMode: "disable"},
	}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	require.ErrorIs(t, err, postgres.ErrSchemaOutdated)
	require.Contains(t, err.Error(), "hyperfleet-api migrate")
}

func TestHealthEndpoints(t *testing.T) {
	s := startServer(t)
	for _, path := range []string{"/healthz", "/readyz", "/healthcheck"} {
		resp, err := http.Get(s.health + path)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, "ok\n", readAll(t, resp))
	}
}
