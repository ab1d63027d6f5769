package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	cmdmain "github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

const (
	testIssuer   = "https://issuer.hyperfleet.test"
	testAudience = "hyperfleet"
)

// testAPI is a hyperfleet-api with authentication on, on a fresh database, as `make run` starts one.
type testAPI struct {
	url     string
	metrics string
	db      string
	admin   *api.ClientWithResponses
	// mint signs a token for subject with roles.
	mint func(subject string, roles ...auth.Role) string
}

func startAPI(tb testing.TB) *testAPI {
	tb.Helper()
	issuer, err := auth.LoadOrCreateDevIssuer(tb.TempDir())
	require.NoError(tb, err)
	db := harness.NewDatabase(tb)
	srv := apitest.Start(tb, server.Config{
		DB:               server.DBConfig{URL: db, MaxOpenConns: 10},
		RequiredAdapters: map[string][]string{"cluster": {"load-a", "load-b", "load-c"}},
		EnableJWT:        true, EnableAuthz: true,
		JWT: auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience},
	})
	transport := &http.Transport{}
	tb.Cleanup(transport.CloseIdleConnections)
	t := &testAPI{url: srv.API, metrics: srv.Metrics + "/metrics", db: db}
	t.mint = func(subject string, roles ...auth.Role) string {
		tb.Helper()
		token, err := issuer.Mint(subject, roles, "", time.Hour, testIssuer, testAudience)
		require.NoError(tb, err)
		return token
	}
	admin := t.mint("root", auth.RoleAdmin)
	t.admin, err = api.NewClientWithResponses(t.url, api.WithHTTPClient(&http.Client{Transport: transport}),
		api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+admin)
			return nil
		}))
	require.NoError(tb, err)
	return t
}

// load runs hyperfleet-load in process with args and returns what it printed.
func load(tb testing.TB, args ...string) (stdout, stderr string, err error) {
	tb.Helper()
	cmd := command()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// phaseLine is one phase's line of the tool's output.
type phaseLine struct {
	name                string
	ok, stale, failures int
	cpu, rss            string // "-" when not measured
	dbCPU               string // "" when not asked for (no --db-url)
}

var phaseLineRE = regexp.MustCompile(`(?m)^(\w+)\s+(\d+) ok\s+(\d+) stale\s+(\d+) failed\s+\d+ req/s\s+p50\s+\S+\s+p99\s+\S+\s+API\s+(\S+) ms CPU/req\s+(\S+) MiB RSS(?:\s+DB\s+(\S+) ms CPU/req)?$`)

func phaseLines(tb testing.TB, out string) []phaseLine {
	tb.Helper()
	var lines []phaseLine
	for _, m := range phaseLineRE.FindAllStringSubmatch(out, -1) {
		n := func(s string) int {
			v, err := strconv.Atoi(s)
			require.NoError(tb, err)
			return v
		}
		lines = append(lines, phaseLine{name: m[1], ok: n(m[2]), stale: n(m[3]), failures: n(m[4]), cpu: m[5], rss: m[6], dbCPU: m[7]})
	}
	return lines
}

func TestLoadRunsEveryClusterPhaseWithAToken(t *testing.T) {
	s := startAPI(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(s.mint("bench", auth.RoleAdmin)+"\n"), 0o600))

	const clusters, requests = 30, 120
	stdout, stderr, err := load(t, "--url", s.url, "--token-file", tokenFile, "--clusters", fmt.Sprint(clusters),
		"--requests", fmt.Sprint(requests), "--concurrency", "4", "--prefix", "all", "--phase-limit", "1m",
		"--phases", "create,get,list,walk,search,status,settle,poll", "--metrics-url", s.metrics, "--db-url", s.db)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout, stderr)

	got := phaseLines(t, stdout)
	dbLocal := postgresIsLocal(t, s.db)
	if !dbLocal {
		require.Contains(t, stdout, "database CPU: not measured", "a server whose backends are not in /proc")
	}
	names := make([]string, len(got))
	for i, l := range got {
		names[i] = l.name
		require.Zero(t, l.failures, "%s: failures; stderr:\n%s", l.name, stderr)
		want := requests
		if l.name == "create" || l.name == "settle" {
			want = clusters
		}
		require.Equal(t, want, l.ok+l.stale, "%s: every request answered as expected", l.name)
		if l.name != "status" && l.name != "settle" {
			require.Zero(t, l.stale, "%s: only status reports can be stale", l.name)
		}
		// The API (in this process here) spent CPU on the phase, and says how much per request.
		cpu, err := strconv.ParseFloat(l.cpu, 64)
		require.NoError(t, err, "%s: CPU per request %q", l.name, l.cpu)
		require.Positive(t, cpu, l.name)
		require.NotEqual(t, "-", l.rss, l.name)
		// So did PostgreSQL, in the backends serving the API's database, which the load measures when they are
		// this machine's processes (a test container's are not: then it says so and prints none).
		if !dbLocal {
			require.Empty(t, l.dbCPU, l.name)
			continue
		}
		db, err := strconv.ParseFloat(l.dbCPU, 64)
		require.NoError(t, err, "%s: database CPU per request %q", l.name, l.dbCPU)
		require.Positive(t, db, l.name)
	}
	require.Equal(t, []string{"create", "get", "list", "walk", "search", "status", "settle", "poll"}, names, "stdout:\n%s", stdout)

	// The load did what it says: the clusters exist, and settle left load-a nothing pending.
	list, err := s.admin.ListClustersWithResponse(t.Context(), &api.ListClustersParams{Search: ptr("name like 'all-%'")})
	require.NoError(t, err)
	require.NotNil(t, list.JSON200, "%d %s", list.StatusCode(), list.Body)
	require.EqualValues(t, clusters, deref(list.JSON200.Total))
	pending, err := s.admin.ListClustersWithResponse(t.Context(), &api.ListClustersParams{PendingFor: ptr("load-a")})
	require.NoError(t, err)
	require.NotNil(t, pending.JSON200, "%d %s", pending.StatusCode(), pending.Body)
	require.Zero(t, deref(pending.JSON200.Total))
}

func TestLoadTakesItsTokenFromAFlagAFileOrTheEnvironment(t *testing.T) {
	s := startAPI(t)
	dir := t.TempDir()
	good := s.mint("bench", auth.RoleAdmin)
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(good+"\n"), 0o600))
	emptyFile := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(emptyFile, []byte("\n"), 0o600))
	other, err := auth.LoadOrCreateDevIssuer(t.TempDir())
	require.NoError(t, err)
	foreign, err := other.Mint("bench", []auth.Role{auth.RoleAdmin}, "", time.Hour, testIssuer, testAudience)
	require.NoError(t, err)

	tests := []struct {
		name    string
		env     string // HYPERFLEET_TOKEN
		args    []string
		wantErr string
	}{
		{name: "--token-file", args: []string{"--token-file", tokenFile}},
		{name: "--token", args: []string{"--token", good}},
		{name: "HYPERFLEET_TOKEN", env: good},
		{name: "a flag wins over the environment", env: foreign, args: []string{"--token-file", tokenFile}},
		{name: "no token", wantErr: "needs a bearer token: give --token-file or $HYPERFLEET_TOKEN"},
		{name: "a token of another issuer", args: []string{"--token", foreign}, wantErr: "refused the token: HYPERFLEET-AUT-001"},
		{name: "both flags", args: []string{"--token", good, "--token-file", tokenFile}, wantErr: "not both"},
		{name: "an empty token file", args: []string{"--token-file", emptyFile}, wantErr: "is empty"},
		{name: "a missing token file", args: []string{"--token-file", filepath.Join(dir, "absent")}, wantErr: "--token-file"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envToken, tt.env)
			stdout, stderr, err := load(t, append([]string{"--url", s.url, "--clusters", "4", "--requests", "10", "--metrics-url", "",
				"--concurrency", "2", "--phases", "create,get", "--prefix", fmt.Sprintf("tok%d", i)}, tt.args...)...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Empty(t, phaseLines(t, stdout), "nothing is measured without access")
				return
			}
			require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Equal(t, []phaseLine{{name: "create", ok: 4, cpu: "-", rss: "-"}, {name: "get", ok: 10, cpu: "-", rss: "-"}}, phaseLines(t, stdout))
		})
	}
}

// TestStaleReportsAreExpectedNotFailures makes every report of a phase stale (the API holds a newer one) and
// checks that the phase counts them as such, and that any other refusal is a failure.
func TestStaleReportsAreExpectedNotFailures(t *testing.T) {
	s := startAPI(t)
	ctx := t.Context()
	stream, err := s.admin.CreateVersionStreamWithResponse(ctx, nil, api.VersionStreamCreate{Name: loadStream, Spec: api.VersionStreamSpec{TargetVersion: "4.16"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, stream.StatusCode(), "%s", stream.Body)
	created, err := s.admin.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "stale", Spec: api.ClusterSpec{VersionStream: loadStream}})
	require.NoError(t, err)
	require.NotNil(t, created.JSON201, "%d %s", created.StatusCode(), created.Body)
	id := created.JSON201.Id
	load := &loadClient{Client: s.admin.ClientInterface.(*api.Client), kinds: api.Kinds()}
	// A report of a newer generation makes every later one of generation 1 (as the load reports) stale; at one
	// generation the server's order of arrival decides, so the adapter's clock cannot make one stale.
	patched, err := s.admin.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, id, nil,
		api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}})
	require.NoError(t, err)
	require.NotNil(t, patched.JSON200, "%d %s", patched.StatusCode(), patched.Body)
	require.Equal(t, int64(2), patched.JSON200.Generation)
	first, err := s.admin.PostClusterStatusWithResponse(ctx, id, api.AdapterStatusReport{Adapter: "load-a", ObservedGeneration: 2,
		ObservedTime: time.Now().UTC(), Conditions: []api.ReportedCondition{{Type: "Available", Status: "True"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.StatusCode(), "%s", first.Body)

	var errs bytes.Buffer
	// One client, so that the fresh reports cannot race each other into being stale.
	cfg := config{concurrency: 1, phaseLimit: time.Minute, out: io.Discard, errs: &errs}
	tests := []struct {
		name              string
		adapter           string
		generation        int64 // observed; 0 reports as the load does
		wantOK, wantStale int
		wantFailures      int64
		wantErrs          string
	}{
		{name: "stale reports", adapter: "load-a", wantStale: 20},
		{name: "fresh reports", adapter: "load-b", wantOK: 20},
		// A report ahead of the resource's generation is refused with 422: a failure, whatever the phase.
		{name: "refused reports", adapter: "load-c", generation: 3, wantFailures: 20, wantErrs: "status 422 HYPERFLEET-VAL-006"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs.Reset()
			r := phase(ctx, cfg, "status", 20, func(ctx context.Context, _ int) (answer, error) {
				if tt.generation != 0 {
					resp, err := s.admin.PostClusterStatusWithResponse(ctx, id, api.AdapterStatusReport{
						Adapter: tt.adapter, ObservedGeneration: tt.generation, ObservedTime: time.Now().UTC(),
						Conditions: []api.ReportedCondition{{Type: "Available", Status: "True"}},
					})
					if err != nil {
						return answer{}, err
					}
					return answer{status: resp.StatusCode(), code: problemCode(resp.Body)}, nil
				}
				return report(ctx, load, id, tt.adapter, time.Now(), map[string]any{"load": true})
			}, http.StatusOK)
			require.Equal(t, tt.wantOK, r.ok)
			require.Equal(t, tt.wantStale, r.stale)
			require.Equal(t, tt.wantFailures, r.failures)
			require.Len(t, r.latencies, tt.wantOK+tt.wantStale, "latencies cover every expected answer")
			require.Contains(t, errs.String(), tt.wantErrs)
			var line bytes.Buffer
			r.print(&line)
			require.Equal(t, []phaseLine{{name: "status", ok: tt.wantOK, stale: tt.wantStale, failures: int(tt.wantFailures), cpu: "-", rss: "-"}},
				phaseLines(t, line.String()))
		})
	}
}

func TestLoadRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown phase", []string{"--phases", "create,gets"}, `unknown phase "gets"`},
		{"no clients", []string{"--concurrency", "0"}, "must be positive"},
		{"no adapters", []string{"--adapters", ""}, "--adapters"},
		{"arguments", []string{"http://127.0.0.1:8000"}, "unknown command"},
		{"old single-dash flags", []string{"-url", "http://127.0.0.1:8000"}, "unknown shorthand flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := load(t, tt.args...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestVersionFlagPrintsVersionAndBuild(t *testing.T) {
	stdout, _, err := load(t, "--version")
	require.NoError(t, err)
	require.Equal(t, "hyperfleet-load version "+cmdmain.Version()+" ("+cmdmain.Build()+")\n", stdout)
}

// postgresIsLocal tells whether the database's backends are processes of this machine.
func postgresIsLocal(tb testing.TB, url string) bool {
	tb.Helper()
	conn, err := pgx.Connect(tb.Context(), url)
	require.NoError(tb, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var pid int32
	require.NoError(tb, conn.QueryRow(tb.Context(), "SELECT pg_backend_pid()").Scan(&pid))
	return isPostgresProcess(pid)
}
