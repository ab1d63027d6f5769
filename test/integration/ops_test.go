package integration

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
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

func TestMetricsExposeTheNamedSeries(t *testing.T) {
	s := startServer(t)
	c := createCluster(t, s, "measured", nil)
	patched, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctxFor(t), c.Id, nil,
		api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}})
	require.NoError(t, err)
	require.Equal(t, int64(2), patched.JSON200.Generation)
	postClusterStatus(t, s, c, report("applier", 2, time.Now().UTC().Add(-time.Second), available("False")), http.StatusCreated)
	// Stale: an older generation than the stored report's.
	postClusterStatus(t, s, c, report("applier", 1, time.Now().UTC(), available("True")), http.StatusConflict)
	// Never reported on: pending for the required applier, for less than a minute.
	createCluster(t, s, "waiting", nil)

	resp, err := http.Get(s.metrics + "/metrics")
	require.NoError(t, err)
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, series := range []string{
		`hyperfleet_api_requests_total{code="201",method="POST",route="/api/hyperfleet/v1/clusters"} 2`,
		`hyperfleet_api_request_duration_seconds_bucket{method="POST",route="/api/hyperfleet/v1/clusters/{id}/statuses"`,
		`hyperfleet_status_writes_total{kind="Cluster",outcome="created"} 1`,
		`hyperfleet_status_writes_total{kind="Cluster",outcome="stale"} 1`,
		`hyperfleet_aggregations_total{changed="true",kind="Cluster",phase="Progressing"} 1`,
		`hyperfleet_resources{kind="Cluster",phase="Progressing"} 1`,
		`hyperfleet_pending_resources{adapter="applier",kind="Cluster",operation="create"} 1`,
		`hyperfleet_pending_resources{adapter="applier",kind="Cluster",operation="update"} 0`,
		`hyperfleet_pending_resources_longer_than{adapter="applier",kind="Cluster",operation="create",threshold="1m"} 0`,
		`hyperfleet_pending_oldest_age_seconds{adapter="applier",kind="NodePool",operation="delete"} 0`,
		`hyperfleet_pending_count_errors_total 0`,
		`go_sql_open_connections{db_name="hyperfleet"}`,
		`process_cpu_seconds_total`,
	} {
		require.Contains(t, body, series)
	}
}
