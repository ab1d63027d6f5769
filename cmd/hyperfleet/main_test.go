package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// The adapters the test servers require: streams and clusters stay Pending until a report comes, so that tests
// can watch and wait for them; node pools and schedules require none and are Ready at once.
const (
	resolver = "version-resolver"
	applier  = "applier"
)

const (
	testIssuer   = "https://issuer.hyperfleet.test"
	testAudience = "hyperfleet"
)

// testAPI is a running hyperfleet-api on a fresh database and a generated client for what the CLI does not do
// (adapters' reports).
type testAPI struct {
	url    string
	client *api.ClientWithResponses
	// mint signs a token for subject with roles; nil when authentication is off.
	mint func(subject string, roles ...auth.Role) string
}

// startAPI serves a fresh database on loopback ports until the test ends; withAuth turns JWTs and roles on.
func startAPI(tb testing.TB, withAuth bool) *testAPI {
	tb.Helper()
	return startAPIWith(tb, withAuth, nil)
}

// startAPIWith is startAPI with the server's configuration changed by tune.
func startAPIWith(tb testing.TB, withAuth bool, tune func(*server.Config)) *testAPI {
	tb.Helper()
	cfg := server.Config{
		DB:               server.DBConfig{URL: harness.NewDatabase(tb), MaxOpenConns: 10},
		RequiredAdapters: map[string][]string{"versionstream": {resolver}, "cluster": {applier}},
		Build:            "test-build",
	}
	t := &testAPI{}
	var editors []api.ClientOption
	if withAuth {
		issuer, err := auth.LoadOrCreateDevIssuer(tb.TempDir())
		require.NoError(tb, err)
		cfg.EnableJWT, cfg.EnableAuthz = true, true
		cfg.JWT = auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience}
		t.mint = func(subject string, roles ...auth.Role) string {
			token, err := issuer.Mint(subject, roles, "", time.Hour, testIssuer, testAudience)
			require.NoError(tb, err)
			return token
		}
		admin := t.mint("root", auth.RoleAdmin)
		editors = append(editors, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+admin)
			return nil
		}))
	}
	if tune != nil {
		tune(&cfg)
	}
	srv := apitest.Start(tb, cfg)
	transport := &http.Transport{}
	tb.Cleanup(transport.CloseIdleConnections)
	t.url = srv.API
	checked := harness.NewContract(tb).Transport(tb, transport)
	editors = append(editors, api.WithHTTPClient(&http.Client{Transport: checked}))
	var err error
	t.client, err = api.NewClientWithResponses(t.url, editors...)
	require.NoError(tb, err)
	return t
}

// cli runs the CLI in process against one server, with an environment of its own (an empty configuration
// directory; nothing from the test process's environment).
type cli struct {
	env   map[string]string
	kinds *api.KindTable
}

func newCLI(tb testing.TB, s *testAPI) *cli {
	tb.Helper()
	dir := tb.TempDir()
	return &cli{env: map[string]string{"HYPERFLEET_SERVER": s.url, "XDG_CONFIG_HOME": dir, "HOME": dir}, kinds: api.Kinds()}
}

// result is what one command line did.
type result struct {
	out, err string
	code     int
}

// run runs one command line to its end.
func (c *cli) run(tb testing.TB, args ...string) result {
	tb.Helper()
	return c.runWith(tb, testContext(tb), "", args...)
}

// runWith runs one command line with stdin and a context of the caller's.
func (c *cli) runWith(tb testing.TB, ctx context.Context, stdin string, args ...string) result { //nolint:revive // the test's tb comes first, as in every helper
	tb.Helper()
	var out, errOut logbuf.Buffer
	code := run(ctx, c.kinds, args, strings.NewReader(stdin), &out, &errOut, c.getenv)
	return result{out: out.String(), err: errOut.String(), code: code}
}

func (c *cli) getenv(key string) string { return c.env[key] }

// ok runs a command line that must succeed and returns its stdout.
func (c *cli) ok(tb testing.TB, args ...string) string {
	tb.Helper()
	r := c.run(tb, args...)
	require.Equal(tb, exitOK, r.code, "hyperfleet %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.out, r.err)
	return r.out
}

// fails runs a command line that must exit with code and returns its stderr.
func (c *cli) fails(tb testing.TB, code int, args ...string) string {
	tb.Helper()
	r := c.run(tb, args...)
	require.Equal(tb, code, r.code, "hyperfleet %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.out, r.err)
	return r.err
}

func testContext(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// background runs a long command line (watch, wait) in a goroutine; stop cancels it and returns its result.
type background struct {
	out, err logbuf.Buffer
	cancel   context.CancelFunc
	done     chan int
}

func (c *cli) start(tb testing.TB, args ...string) *background {
	tb.Helper()
	ctx, cancel := context.WithCancel(testContext(tb))
	b := &background{cancel: cancel, done: make(chan int, 1)}
	go func() { b.done <- run(ctx, c.kinds, args, strings.NewReader(""), &b.out, &b.err, c.getenv) }()
	tb.Cleanup(cancel)
	return b
}

// finish waits for the command to end by itself.
func (b *background) finish(tb testing.TB) result {
	tb.Helper()
	select {
	case code := <-b.done:
		return result{out: b.out.String(), err: b.err.String(), code: code}
	case <-time.After(20 * time.Second):
		require.FailNow(tb, "the command did not finish", "stdout: %s\nstderr: %s", b.out.String(), b.err.String())
		return result{}
	}
}

// stop interrupts the command, as Ctrl-C does, and returns its result.
func (b *background) stop(tb testing.TB) result {
	tb.Helper()
	b.cancel()
	return b.finish(tb)
}

// eventually waits for the command's stdout (or stderr) to satisfy ok.
func (b *background) eventually(tb testing.TB, what string, ok func(out, errOut string) bool) {
	tb.Helper()
	require.Eventually(tb, func() bool { return ok(b.out.String(), b.err.String()) }, 15*time.Second, 20*time.Millisecond,
		"%s\nstdout: %s\nstderr: %s", what, b.out.String(), b.err.String())
}

// report posts an adapter's report about a root resource (by kind plural) through the generic client.
func (s *testAPI) report(tb testing.TB, plural string, id uuid.UUID, adapter string, generation int64, conds ...api.ReportedCondition) {
	tb.Helper()
	rep := api.AdapterStatusReport{Adapter: adapter, ObservedGeneration: generation, ObservedTime: time.Now().UTC(), Conditions: conds}
	k := api.Kinds().Lookup(plural)
	require.NotNil(tb, k, plural)
	answer, err := api.ReadAnswer[api.AdapterStatus](s.client.ClientInterface.(*api.Client).PutResourceStatus(testContext(tb), k, api.ResourceRef{ID: id}, rep))
	require.NoError(tb, err)
	require.Contains(tb, []int{http.StatusOK, http.StatusCreated}, answer.StatusCode(), "body: %s", answer.Body)
}

// cond builds a reported condition.
func cond(typ string, status conditions.Status, reason string) api.ReportedCondition {
	c := api.ReportedCondition{Type: typ, Status: api.ReportedConditionStatus(status)}
	if reason != "" {
		c.Reason = &reason
	}
	return c
}

// idOf returns the id of the resource a get command line names.
func (c *cli) idOf(tb testing.TB, args ...string) uuid.UUID {
	tb.Helper()
	var obj api.ResourceMeta
	require.NoError(tb, json.Unmarshal([]byte(c.ok(tb, append(append([]string{"get"}, args...), "-o", "json")...)), &obj))
	require.NotEqual(tb, uuid.Nil, obj.Id)
	return obj.Id
}

// seedStream creates a version stream that clusters can name.
func (c *cli) seedStream(tb testing.TB, name string) {
	tb.Helper()
	c.ok(tb, "create", "versionstream", name, "--spec", `{"target_version": "4.16"}`)
}

// Specs the tests create resources with.
const (
	clusterSpec  = `{"version_stream": "stable-4-16", "hosted_cluster": {"dns": {"base_domain": "example.com"}}}`
	nodePoolSpec = `{"replicas": 3, "platform": {"hivelocity": {"device_type": "s1.small", "region": "LAX2"}}}`
)
