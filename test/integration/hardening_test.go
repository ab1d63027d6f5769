package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// Requests with made-up methods, sent without a token, must not create metric series: every label comes from a
// closed set. (An attack run grew 320,000 series from 20,000 such requests.)
func TestMadeUpMethodsDoNotGrowMetrics(t *testing.T) {
	s, _ := startSecuredServer(t)
	seriesCount := func() int {
		n := 0
		for _, line := range strings.Split(scrape(t, s.metrics+"/metrics"), "\n") {
			if strings.HasPrefix(line, "hyperfleet_api_requests_total{") || strings.HasPrefix(line, "hyperfleet_api_request_duration_seconds_count{") {
				n++
			}
		}
		return n
	}
	const methods = 20_000
	for i := range methods {
		path := []string{"/api/hyperfleet/v1/clusters", "/api/hyperfleet/v1/nothing/" + fmt.Sprint(i), "/x"}[i%3]
		req, err := http.NewRequest(fmt.Sprintf("X%06d", i), s.base+path, http.NoBody)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req) // not the contract transport: these are not operations of the API
		require.NoError(t, err)
		_ = readAll(t, resp)
		require.Less(t, resp.StatusCode, 500)
	}
	metrics := scrape(t, s.metrics+"/metrics")
	require.NotContains(t, metrics, `method="X0`)
	require.NotContains(t, metrics, `route="/api/hyperfleet/v1/nothing`)
	require.Contains(t, metrics, `method="OTHER"`)
	series := seriesCount()
	t.Logf("%d request series after %d requests with made-up methods", series, methods)
	require.LessOrEqual(t, series, 10, "requests with made-up methods and paths must fall into a handful of series")
}

// Values Go's JSON accepts and PostgreSQL's jsonb refuses are 400 HYPERFLEET-VAL-008 naming the field, on every
// write endpoint, decided before the database is touched; nothing is stored.
func TestValuesPostgreSQLRefusesAre400(t *testing.T) {
	s := startServer(t)
	c := createCluster(t, s, "target", nil)
	np := createNodePool(t, s, c, "pool", 1)
	now := time.Now().UTC().Format(time.RFC3339)
	report := func(extra string) string {
		return `{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `",` + extra + `}`
	}
	tests := []struct {
		name, method, path, contentType, body, field string
	}{
		{"NUL in a label", http.MethodPost, "/api/hyperfleet/v1/clusters", "application/json",
			`{"name":"nul","labels":{"env":"a\u0000b"},"spec":{"version_stream":"stable-4-16"}}`, "labels.env"},
		{"NUL in the base domain", http.MethodPost, "/api/hyperfleet/v1/clusters", "application/json",
			`{"name":"nul","spec":{"version_stream":"stable-4-16","hosted_cluster":{"dns":{"base_domain":"a\u0000.com"}}}}`,
			"spec.hosted_cluster.dns.base_domain"},
		{"lone surrogate in a label patch", http.MethodPatch, c.Href, "application/merge-patch+json",
			`{"labels":{"team":"\ud800"}}`, "labels.team"},
		{"NUL in userdata", http.MethodPost, c.Href + "/nodepools", "application/json",
			`{"name":"nul","spec":{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2","userdata":"#cloud-config\u0000"}}}}`,
			"spec.platform.hivelocity.userdata"},
		{"NUL in a selector key", http.MethodPatch, np.Href, "application/merge-patch+json",
			`{"spec":{"platform":{"hivelocity":{"selector":{"ra\u0000ck":"a"}}}}}`, "spec.platform.hivelocity.selector"},
		{"invalid UTF-8 in a label", http.MethodPost, "/api/hyperfleet/v1/versionstreams", "application/json",
			"{\"name\":\"bad\",\"labels\":{\"x\":\"\xc0\xaf\"},\"spec\":{\"target_version\":\"4.16\"}}", "labels.x"},
		{"NUL in status data", http.MethodPut, c.Href + "/statuses", "application/json",
			report(`"conditions":[{"type":"Available","status":"True"}],"data":{"x":"\u0000"}`), "data.x"},
		{"NUL in status metadata", http.MethodPost, np.Href + "/statuses", "application/json",
			report(`"conditions":[{"type":"Available","status":"True"}],"metadata":{"\u0000":1}`), "metadata"},
		{"lone surrogate in a condition message", http.MethodPut, c.Href + "/statuses", "application/json",
			report(`"conditions":[{"type":"Available","status":"True","message":"\udc00"}]`), "conditions[0].message"},
		{"a number too small for numeric", http.MethodPut, c.Href + "/statuses", "application/json",
			report(`"conditions":[{"type":"Available","status":"True"}],"data":{"x":1e-100000}`), "data.x"},
		{"a number with too many decimals", http.MethodPut, c.Href + "/statuses", "application/json",
			report(`"conditions":[{"type":"Available","status":"True"}],"data":{"x":0.` + strings.Repeat("7", 20000) + `}`), "data.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, s.base+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", tt.contentType)
			resp, err := s.http.Do(req)
			require.NoError(t, err)
			body := readAll(t, resp)
			p := problem(t, resp, []byte(body), http.StatusBadRequest, "HYPERFLEET-VAL-008")
			require.Equal(t, tt.field, deref(p.Errors)[0].Field, body)
		})
	}
	// Nothing was stored: no new resources, no reports, the label untouched.
	clusters, err := s.ListClustersWithResponse(ctxFor(t), nil)
	require.NoError(t, err)
	require.Len(t, clusters.JSON200.Items, 1)
	streams, err := s.ListVersionStreamsWithResponse(ctxFor(t), &api.ListVersionStreamsParams{Search: ptr("name = 'bad'")})
	require.NoError(t, err)
	require.Empty(t, streams.JSON200.Items)
	statuses, err := s.ListClusterStatusesWithResponse(ctxFor(t), c.Id)
	require.NoError(t, err)
	require.Empty(t, statuses.JSON200.Items)
	got, err := s.GetClusterWithResponse(ctxFor(t), c.Id)
	require.NoError(t, err)
	require.NotContains(t, got.JSON200.Labels, "team")
}

// A client's faults are not the server's: broken chunked framing is a 400, a body that does not arrive within the
// read timeout a 408, and a client that hangs up mid-body a 499 that is logged at debug level. None may show up
// as a 5xx in the request metrics, where it would page someone.
func TestClientFaultsAreNotServerErrors(t *testing.T) {
	s := startServerOn(t, harness.NewDatabase(t), server.Config{HTTPReadTimeout: time.Second,
		RequiredAdapters: map[string][]string{"cluster": {"applier"}}})
	addr := strings.TrimPrefix(s.base, "http://")
	const head = "POST /api/hyperfleet/v1/clusters HTTP/1.1\r\nHost: hyperfleet\r\nContent-Type: application/json\r\n"
	send := func(t *testing.T, raw string) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		_, err = io.WriteString(conn, raw)
		require.NoError(t, err)
		return conn
	}
	answer := func(t *testing.T, conn net.Conn, status int, code string) {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		problem(t, resp, []byte(readAll(t, resp)), status, code)
	}

	t.Run("broken chunked framing", func(t *testing.T) {
		conn := send(t, head+"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
		answer(t, conn, http.StatusBadRequest, "HYPERFLEET-VAL-001")
	})
	t.Run("a body slower than the read timeout", func(t *testing.T) {
		conn := send(t, head+"Content-Length: 100\r\n\r\n{\"name\":")
		answer(t, conn, http.StatusRequestTimeout, "HYPERFLEET-LMT-003")
	})
	t.Run("a client that hangs up mid-body", func(t *testing.T) {
		conn := send(t, head+"Content-Length: 100\r\n\r\n{\"name\":")
		require.NoError(t, conn.(*net.TCPConn).CloseWrite())
		counted := func() bool {
			return strings.Contains(scrape(t, s.metrics+"/metrics"), `hyperfleet_api_requests_total{code="499",method="POST",route="/api/hyperfleet/v1/clusters"} 1`)
		}
		if !assert.Eventually(t, counted, 10*time.Second, 20*time.Millisecond, "the hang-up is counted as 499") {
			t.Log(scrape(t, s.metrics+"/metrics"))
		}
	})
	for _, line := range strings.Split(scrape(t, s.metrics+"/metrics"), "\n") {
		if strings.HasPrefix(line, "hyperfleet_api_requests_total{") {
			require.NotContains(t, line, `code="5`, "no client fault may count as a server error")
		}
	}
	list, err := s.ListClustersWithResponse(ctxFor(t), nil)
	require.NoError(t, err)
	require.Zero(t, deref(list.JSON200.Total), "nothing was created")
}

// A database that holds a request's statement (here: a table lock nobody releases) costs the request a 503 after
// the configured statement or lock timeout, not an open-ended wait that pins a connection; and a /metrics scrape
// answers at once with the last resource counts it got, saying how old they are and that counting failed.
func TestAHungDatabaseCostsTimeoutsNotHangs(t *testing.T) {
	tests := []struct {
		name      string
		statement time.Duration
		lock      time.Duration
	}{
		{"lock timeout", 0, 200 * time.Millisecond},
		{"statement timeout", 300 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
				DB: server.DBConfig{StatementTimeout: tt.statement, LockTimeout: tt.lock}, PhaseCountEvery: time.Nanosecond})
			ctx := ctxFor(t)
			createCluster(t, s, "counted", nil)
			scrapeWithin := func() string {
				t.Helper()
				// Bounded so that the old behaviour (a scrape waiting 5 s per kind) fails here rather than hangs.
				client := &http.Client{Timeout: 5 * time.Second}
				resp, err := client.Get(s.metrics + "/metrics")
				require.NoError(t, err, "the scrape must answer while the database is stuck")
				require.Equal(t, http.StatusOK, resp.StatusCode)
				return readAll(t, resp)
			}
			first := scrapeWithin()
			require.Contains(t, first, `hyperfleet_resources{kind="Cluster",phase="Pending"} 1`)
			require.Contains(t, first, `hyperfleet_pending_resources{adapter="applier",kind="Cluster",operation="create"} 1`)

			unlock := lockClusters(t, s.dsn)

			resp, err := s.ListClustersWithResponse(ctx, nil)
			require.NoError(t, err)
			problem(t, resp.HTTPResponse, resp.Body, http.StatusServiceUnavailable, "HYPERFLEET-INT-002")
			require.Equal(t, "1", resp.HTTPResponse.Header.Get("Retry-After"))

			metrics := scrapeWithin()
			require.Contains(t, metrics, `hyperfleet_resources{kind="Cluster",phase="Pending"} 1`, "the last counts are kept")
			require.Contains(t, metrics, "hyperfleet_resources_count_errors_total 1")
			require.NotContains(t, metrics, "hyperfleet_resources_counted_timestamp_seconds 0\n")
			require.Contains(t, metrics, `hyperfleet_pending_resources{adapter="applier",kind="Cluster",operation="create"} 1`, "the last pending counts are kept")
			require.Contains(t, metrics, "hyperfleet_pending_count_errors_total 1")
			require.NotContains(t, metrics, "hyperfleet_pending_counted_timestamp_seconds 0\n")

			unlock()
			again, err := s.ListClustersWithResponse(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, again.StatusCode(), "body: %s", again.Body)
		})
	}
}

// lockClusters takes the clusters table's ACCESS EXCLUSIVE lock in a transaction of its own, so that every read of
// it waits, and returns what releases it (also done at the test's end).
func lockClusters(t *testing.T, dsn string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(ctx) })
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE clusters IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	var once sync.Once
	unlock = func() { once.Do(func() { require.NoError(t, tx.Rollback(ctx)) }) }
	t.Cleanup(unlock)
	return unlock
}
