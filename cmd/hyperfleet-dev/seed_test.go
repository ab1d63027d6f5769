package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
	"github.com/hyperfleet/hyperfleet/test/logbuf"
)

// startAPI serves a fresh database on loopback until the test ends and returns a client for it.
func startAPI(t *testing.T) *api.ClientWithResponses {
	t.Helper()
	srv := apitest.Start(t, server.Config{
		MaxBodyBytes: 1 << 20,
		DB:           server.DBConfig{URL: harness.NewDatabase(t), MaxOpenConns: 5},
	})
	client, err := api.NewClientWithResponses(srv.API, api.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	require.NoError(t, err)
	return client
}

// TestSeedIsIdempotent seeds twice, with a change a developer made in between: the second run creates nothing and
// leaves the change alone.
func TestSeedIsIdempotent(t *testing.T) {
	client := startAPI(t)
	ctx := t.Context()
	st, err := newStack(testConfig(t))
	require.NoError(t, err)
	resources := demoResources(api.Kinds(), st.managementClusters(), "clusters")
	var first bytes.Buffer
	require.NoError(t, seedDemo(ctx, client.ClientInterface.(*api.Client), resources, slog.New(slog.NewJSONHandler(&first, nil))))
	require.Equal(t, 4, strings.Count(first.String(), `"msg":"created"`), first.String())

	tz := "Europe/Berlin"
	patched, err := client.PatchUpgradeScheduleWithBodyWithResponse(ctx, scheduleID(t, client), nil, "application/merge-patch+json",
		strings.NewReader(`{"spec": {"timezone": "`+tz+`"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), "%s", patched.Body)

	var second bytes.Buffer
	require.NoError(t, seedDemo(ctx, client.ClientInterface.(*api.Client), resources, slog.New(slog.NewJSONHandler(&second, nil))))
	require.Equal(t, 4, strings.Count(second.String(), `"msg":"exists; left as it is"`), second.String())

	streams, err := client.ListVersionStreamsWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Len(t, streams.JSON200.Items, 1)
	require.Equal(t, demoStream, streams.JSON200.Items[0].Name)
	require.Equal(t, demoStreamVersion, streams.JSON200.Items[0].Spec.TargetVersion)
	// The stream's rollout policy is one the version resolver reads: canary, early and the rest.
	spec, err := json.Marshal(streams.JSON200.Items[0].Spec)
	require.NoError(t, err)
	policy, err := rollout.PolicyOf(spec)
	require.NoError(t, err)
	require.Len(t, policy.Stages, 3)
	require.Equal(t, 0, policy.StageOf(map[string]string{demoStageLabel: "canary"}))
	require.Equal(t, 1, policy.StageOf(map[string]string{demoStageLabel: "early"}))
	require.Equal(t, 2, policy.StageOf(map[string]string{"env": "dev"}))
	require.Equal(t, 1, policy.Stages[0].MaxAtOnce.Of(10))
	require.Equal(t, 5, policy.Stages[1].MaxAtOnce.Of(10))
	require.Equal(t, 30*time.Second, policy.Stages[0].Soak)
	schedules, err := client.ListUpgradeSchedulesWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Len(t, schedules.JSON200.Items, 1)
	require.Equal(t, tz, *schedules.JSON200.Items[0].Spec.Timezone)

	// The management clusters make run starts, each naming its kubeconfig file in the applier's credentials
	// directory, with room for two clusters and one: the fourth cluster of the walk-through waits.
	mcs, err := client.ListManagementClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, mcs.StatusCode(), "%s", mcs.Body)
	got := map[string][2]any{}
	for _, mc := range mcs.JSON200.Items {
		require.Equal(t, "clusters", *mc.Spec.Namespace)
		require.True(t, *mc.Spec.Schedulable)
		got[mc.Name] = [2]any{mc.Spec.Capacity.MaxHostedClusters, mc.Spec.Credentials.Kubeconfig}
	}
	require.Equal(t, map[string][2]any{mcA: {2, mcA}, mcB: {1, mcB}}, got)
}

func scheduleID(t *testing.T, client *api.ClientWithResponses) api.UpgradescheduleId {
	t.Helper()
	list, err := client.ListUpgradeSchedulesWithResponse(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.JSON200.Items, 1)
	return list.JSON200.Items[0].Id
}

// TestDBServesAndStops runs `hyperfleet-dev db` on a fresh data directory until it answers, then stops it.
func TestDBServesAndStops(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		// As root the server runs as the postgres user, which must be able to traverse t.TempDir's 0700 parent.
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	}
	cfg := dbConfig{dataDir: filepath.Join(dir, "pg"), port: freePort(t), database: "hyperfleet"}
	ctx, cancel := context.WithCancel(context.Background())
	var logs logbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- runDB(ctx, cfg, slog.New(slog.NewJSONHandler(&logs, nil))) }()
	probe := postgresProbe("postgres://postgres@127.0.0.1:" + strconv.FormatUint(uint64(cfg.port), 10) + "/hyperfleet?sslmode=disable")
	deadline := time.Now().Add(time.Minute)
	for probe(ctx) != nil {
		require.True(t, time.Now().Before(deadline), "no answer within a minute: %s", logs.String())
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, logs.String(), `"msg":"database ready"`)
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, logs.String(), `"msg":"embedded postgres stopped"`)
	require.Error(t, probe(context.Background()))
}

func freePort(t *testing.T) uint32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return uint32(l.Addr().(*net.TCPAddr).Port) //nolint:gosec // a port fits
}
