package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// One identity runs at most --lists-per-identity lists at once: while its list waits on the database, another
// of its lists is 429 HYPERFLEET-LMT-004 with Retry-After, and once the first is done the next is served.
func TestListsAreCappedPerIdentity(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		ListsPerIdentity: 1})
	ctx := ctxFor(t)
	createCluster(t, s, "listed", nil)
	unlock := lockClusters(t, s.dsn)

	first := make(chan int, 1)
	go func() {
		resp, err := s.ListClustersWithResponse(context.Background(), nil)
		if err != nil {
			first <- 0
			return
		}
		first <- resp.StatusCode()
	}()
	watcher, err := pgx.Connect(ctx, s.dsn)
	require.NoError(t, err)
	defer watcher.Close(ctx)
	require.Eventually(t, func() bool {
		var waiting int
		return watcher.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%clusters%'").Scan(&waiting) == nil && waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "the first list waits on the lock")

	resp, err := s.ListClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	problem(t, resp.HTTPResponse, resp.Body, http.StatusTooManyRequests, "HYPERFLEET-LMT-004")
	require.Equal(t, "1", resp.HTTPResponse.Header.Get("Retry-After"))

	unlock()
	require.Equal(t, http.StatusOK, <-first)
	again, err := s.ListClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode(), "body: %s", again.Body)
}

// pending_for for an adapter the kind does not require is an anti-join over the kind's table: only that adapter
// itself or an admin may ask it, on lists and watches; a required adapter's pending work anyone may read.
func TestPendingForIsForRequiredAdaptersOrTheAdapterItself(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	viewer := bearer(mint("vera", []auth.Role{auth.RoleViewer}, ""))
	for _, tt := range []struct {
		name    string
		editor  api.RequestEditorFn
		adapter string
		want    int
	}{
		{"a viewer, a required adapter", viewer, "applier", http.StatusOK},
		{"a viewer, another adapter", viewer, "other", http.StatusForbidden},
		{"another adapter asking for this one", bearer(mint("someone", []auth.Role{auth.RoleAdapter}, "someone")), "other", http.StatusForbidden},
		{"the adapter itself", bearer(mint("other", []auth.Role{auth.RoleAdapter}, "other")), "other", http.StatusOK},
		{"an admin", bearer(mint("ada", []auth.Role{auth.RoleAdmin}, "")), "other", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{PendingFor: ptr(tt.adapter)}, tt.editor)
			require.NoError(t, err)
			if tt.want != http.StatusOK {
				problem(t, resp.HTTPResponse, resp.Body, tt.want, "HYPERFLEET-AUZ-001")
				return
			}
			require.Equal(t, tt.want, resp.StatusCode(), "body: %s", resp.Body)
		})
	}
	// The same rule on a watch, before the stream starts.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/hyperfleet/v1/clusters?watch=true&pending_for=other", http.NoBody)
	require.NoError(t, err)
	require.NoError(t, viewer(ctx, req))
	resp, err := s.http.Do(req)
	require.NoError(t, err)
	problem(t, resp, []byte(readAll(t, resp)), http.StatusForbidden, "HYPERFLEET-AUZ-001")
}

// /metrics is unauthenticated, so a scrape does not count every table: the counts are taken at most once per
// --resources-count-every, and scrapes in between export the last ones.
func TestPhaseCountsAreTakenOncePerInterval(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		PhaseCountEvery: time.Hour})
	createCluster(t, s, "first", nil)
	scrape := func() string {
		t.Helper()
		resp, err := http.Get(s.metrics + "/metrics")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return readAll(t, resp)
	}
	require.Contains(t, scrape(), `hyperfleet_resources{kind="Cluster",phase="Pending"} 1`)
	createCluster(t, s, "second", nil)
	for range 3 {
		require.Contains(t, scrape(), `hyperfleet_resources{kind="Cluster",phase="Pending"} 1`, "the counts of the last hour, not counted again")
	}
}
