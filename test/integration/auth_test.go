package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

const (
	testIssuer   = "https://issuer.hyperfleet.test"
	testAudience = "hyperfleet"
)

// startSecuredServer serves with JWT and roles on, trusting a development issuer whose tokens it returns a
// minting function for.
func startSecuredServer(tb testing.TB, extra ...func(*server.Config)) (*apiServer, func(subject string, roles []auth.Role, adapter string) string) {
	tb.Helper()
	issuer, err := auth.LoadOrCreateDevIssuer(tb.TempDir())
	require.NoError(tb, err)
	cfg := server.Config{
		RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EnableJWT:        true, EnableAuthz: true,
		JWT: auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience},
	}
	for _, f := range extra {
		f(&cfg)
	}
	s := startServerOn(tb, harness.NewDatabase(tb), cfg)
	mint := func(subject string, roles []auth.Role, adapter string) string {
		token, err := issuer.Mint(subject, roles, adapter, time.Hour, testIssuer, testAudience)
		require.NoError(tb, err)
		return token
	}
	return s, mint
}

func bearer(token string) api.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

func TestRequestsNeedAValidToken(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	good := mint("alice", []auth.Role{auth.RoleViewer}, "")
	for name, editor := range map[string]api.RequestEditorFn{
		"no token": func(context.Context, *http.Request) error { return nil },
		"not bearer": func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Basic YTpi")
			return nil
		},
		"garbage":         bearer("not-a-jwt"),
		"tampered":        bearer(good[:len(good)-4] + "AAAA"),
		"unsigned (none)": bearer("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJtYWxsb3J5In0."),
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := s.ListClustersWithResponse(ctx, nil, editor)
			require.NoError(t, err)
			problem(t, resp.HTTPResponse, resp.Body, http.StatusUnauthorized, "HYPERFLEET-AUT-001")
			require.Equal(t, `Bearer realm="hyperfleet"`, resp.HTTPResponse.Header.Get("WWW-Authenticate"))
			require.NotContains(t, string(resp.Body), good)
		})
	}
	resp, err := s.ListClustersWithResponse(ctx, nil, bearer(good))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode())

	// The API's description is public.
	for _, path := range []string{"/api/hyperfleet/v1", "/openapi", "/openapi?format=json", "/openapi-ui/"} {
		r, err := s.http.Get(s.base + path)
		require.NoError(t, err)
		_ = readAll(t, r)
		require.Equal(t, http.StatusOK, r.StatusCode, path)
	}
}

func TestRolesAllowWhatTheContractSays(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	admin := bearer(mint("root", []auth.Role{auth.RoleAdmin}, ""))
	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "secured", Spec: clusterSpec(defaultStream)}, admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	c := created.JSON201
	require.Equal(t, "root", c.CreatedBy, "the identity is the token's subject")

	type call func(n int, as api.RequestEditorFn) int
	status := func(adapter string) call {
		return func(n int, as api.RequestEditorFn) int {
			resp, err := s.PostClusterStatusWithResponse(ctx, c.Id, report(adapter, 1, time.Now().UTC().Add(time.Duration(n)*time.Millisecond-time.Minute), available("True")), as)
			require.NoError(t, err)
			return resp.StatusCode()
		}
	}
	calls := map[string]call{
		"read": func(_ int, as api.RequestEditorFn) int {
			resp, err := s.GetClusterWithResponse(ctx, c.Id, as)
			require.NoError(t, err)
			return resp.StatusCode()
		},
		"write resource": func(n int, as api.RequestEditorFn) int {
			resp, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
				api.ResourcePatch{Labels: &map[string]*string{"n": ptr(strings.Repeat("x", n%5+1))}}, as)
			require.NoError(t, err)
			return resp.StatusCode()
		},
		"write internal field": func(_ int, as api.RequestEditorFn) int {
			resp, err := s.PatchClusterWithBodyWithResponse(ctx, c.Id, nil, "application/merge-patch+json",
				strings.NewReader(`{"spec":{"hosted_cluster":{"platform":{"type":"None"}}}}`), as)
			require.NoError(t, err)
			return resp.StatusCode()
		},
		"status as applier": status("applier"),
		"status as other":   status("other"),
		"force-delete": func(_ int, as api.RequestEditorFn) int {
			victim, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "victim-" + time.Now().Format("150405.000000")[7:], Spec: clusterSpec(defaultStream)}, admin)
			require.NoError(t, err)
			resp, err := s.ForceDeleteClusterWithResponse(ctx, victim.JSON201.Id, as)
			require.NoError(t, err)
			return resp.StatusCode()
		},
	}
	const ok, forbidden, unprocessable = http.StatusOK, http.StatusForbidden, http.StatusUnprocessableEntity
	matrix := []struct {
		role    string
		token   api.RequestEditorFn
		allowed map[string]int
	}{
		{"viewer", bearer(mint("vera", []auth.Role{auth.RoleViewer}, "")), map[string]int{"read": ok}},
		{"user", bearer(mint("uma", []auth.Role{auth.RoleUser}, "")), map[string]int{"read": ok, "write resource": ok, "write internal field": unprocessable}},
		{"adapter", bearer(mint("svc-applier", []auth.Role{auth.RoleAdapter}, "applier")), map[string]int{"read": ok, "status as applier": ok}},
		{"admin", admin, map[string]int{"read": ok, "write resource": ok, "write internal field": ok, "status as applier": ok, "status as other": ok, "force-delete": http.StatusNoContent}},
	}
	n := 0
	for _, row := range matrix {
		for name, do := range calls {
			t.Run(row.role+" "+name, func(t *testing.T) {
				n++
				want, allowed := row.allowed[name]
				if !allowed {
					want = forbidden
				}
				got := do(n, row.token)
				if want == ok && (got == http.StatusCreated) {
					got = ok // a first report is 201, a later one 200: both are allowed
				}
				require.Equal(t, want, got)
			})
		}
	}
}

func TestEachIdentityHasItsOwnRateLimit(t *testing.T) {
	s, mint := startSecuredServer(t, func(c *server.Config) { c.RateLimit, c.RateBurst = 0.5, 3 })
	ctx := ctxFor(t)
	alice, bob := bearer(mint("alice", []auth.Role{auth.RoleViewer}, "")), bearer(mint("bob", []auth.Role{auth.RoleViewer}, ""))
	for i := range 3 {
		resp, err := s.ListClustersWithResponse(ctx, nil, alice)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "request %d is within the burst", i)
	}
	limited, err := s.ListClustersWithResponse(ctx, nil, alice)
	require.NoError(t, err)
	problem(t, limited.HTTPResponse, limited.Body, http.StatusTooManyRequests, "HYPERFLEET-LMT-002")
	retry, err := strconv.Atoi(limited.HTTPResponse.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Positive(t, retry)
	// Another identity has a bucket of its own.
	resp, err := s.ListClustersWithResponse(ctx, nil, bob)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode())
}

func TestTheACLFileDecidesRoles(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(acl, []byte("users: {carol: [viewer]}\nadapters: {svc-applier: applier}\nadmins: [root]\n"), 0o600))
	s, mint := startSecuredServer(t, func(c *server.Config) { c.ACLFile = acl })
	ctx := ctxFor(t)
	// Roles in the token do not count once an ACL decides: carol's admin claim gives her only viewer.
	carol := bearer(mint("carol", []auth.Role{auth.RoleAdmin}, ""))
	resp, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "acl", Spec: clusterSpec(defaultStream)}, carol)
	require.NoError(t, err)
	problem(t, resp.HTTPResponse, resp.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")

	root := bearer(mint("root", nil, ""))
	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "acl", Spec: clusterSpec(defaultStream)}, root)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)

	applier := bearer(mint("svc-applier", nil, ""))
	st, err := s.PostClusterStatusWithResponse(ctx, created.JSON201.Id, report("applier", 1, time.Now().UTC(), available("True")), applier)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, st.StatusCode(), "body: %s", st.Body)

	stranger := bearer(mint("mallory", []auth.Role{auth.RoleAdmin}, ""))
	list, err := s.ListClustersWithResponse(ctx, nil, stranger)
	require.NoError(t, err)
	problem(t, list.HTTPResponse, list.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
}

// Whether a caller may write statuses at all is known from the route and the token: a caller without the role
// gets 403 whatever the body holds, before the body is read, and only an adapter hears that its body is wrong.
// Which adapter a report speaks for is in the body, so that check still follows it.
func TestStatusWritesCheckTheRoleBeforeTheBody(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	admin := bearer(mint("root", []auth.Role{auth.RoleAdmin}, ""))
	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "reported", Spec: clusterSpec(defaultStream)}, admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	tests := []struct {
		name   string
		token  string
		body   string
		status int
		code   string
	}{
		{"viewer, junk", mint("vera", []auth.Role{auth.RoleViewer}, ""), `{"junk":1}`, http.StatusForbidden, "HYPERFLEET-AUZ-001"},
		{"viewer, not JSON", mint("vera", []auth.Role{auth.RoleViewer}, ""), `{{{`, http.StatusForbidden, "HYPERFLEET-AUZ-001"},
		{"user, junk", mint("uma", []auth.Role{auth.RoleUser}, ""), `{"junk":1}`, http.StatusForbidden, "HYPERFLEET-AUZ-001"},
		{"adapter without a name, junk", mint("anon", []auth.Role{auth.RoleAdapter}, ""), `{"junk":1}`, http.StatusForbidden, "HYPERFLEET-AUZ-001"},
		{"adapter, junk", mint("svc", []auth.Role{auth.RoleAdapter}, "applier"), `{"junk":1}`, http.StatusBadRequest, "HYPERFLEET-VAL-001"},
		{"adapter, as another", mint("svc", []auth.Role{auth.RoleAdapter}, "applier"),
			`{"adapter":"other","observed_generation":1,"observed_time":"` + time.Now().UTC().Format(time.RFC3339) + `","conditions":[{"type":"Available","status":"True"}]}`,
			http.StatusForbidden, "HYPERFLEET-AUZ-001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.PostClusterStatusWithBodyWithResponse(ctx, created.JSON201.Id, "application/json", strings.NewReader(tt.body), bearer(tt.token))
			require.NoError(t, err)
			problem(t, resp.HTTPResponse, resp.Body, tt.status, tt.code)
		})
	}
}

// Adapters have a budget of their own, one bucket per identity and shard (the header every runtime replica sends):
// a fleet's adapter replicas do not share a user's 100/s, nor one another's.
func TestAdaptersHaveTheirOwnBudgetPerShard(t *testing.T) {
	s, mint := startSecuredServer(t, func(c *server.Config) {
		// A token per 100 s: no bucket refills while the test runs, however slow the machine.
		c.RateLimit, c.RateBurst = 0.01, 1
		c.AdapterRateLimit, c.AdapterRateBurst = 0.01, 3
	})
	ctx := ctxFor(t)
	adapterToken := bearer(mint("svc-applier", []auth.Role{auth.RoleAdapter}, "applier"))
	shard := func(v string) api.RequestEditorFn {
		return func(_ context.Context, r *http.Request) error {
			if v != "" {
				r.Header.Set(api.ShardHeader, v)
			}
			return nil
		}
	}
	list := func(t *testing.T, editors ...api.RequestEditorFn) *api.ListClustersResponse {
		t.Helper()
		resp, err := s.ListClustersWithResponse(ctx, nil, editors...)
		require.NoError(t, err)
		return resp
	}
	for i := range 3 {
		require.Equal(t, http.StatusOK, list(t, adapterToken, shard("0/2")).StatusCode(), "request %d is within the adapters' burst, above a user's", i)
	}
	limited := list(t, adapterToken, shard("0/2"))
	p := problem(t, limited.HTTPResponse, limited.Body, http.StatusTooManyRequests, "HYPERFLEET-LMT-002")
	require.Contains(t, deref(p.Detail), "this adapter shard")
	require.NotEmpty(t, limited.HTTPResponse.Header.Get("Retry-After"))

	require.Equal(t, http.StatusOK, list(t, adapterToken, shard("1/2")).StatusCode(), "another shard has a bucket of its own")
	// Without a valid shard the requests share the identity's unsharded bucket, one of its own too.
	for _, none := range []string{"", "2/2", "x"} {
		require.Equal(t, http.StatusOK, list(t, adapterToken, shard(none)).StatusCode(), "shard %q", none)
	}
	limited = list(t, adapterToken, shard("01/2"))
	problem(t, limited.HTTPResponse, limited.Body, http.StatusTooManyRequests, "HYPERFLEET-LMT-002")
	// A user's budget is untouched by the adapter's, and is a user's.
	user := bearer(mint("uma", []auth.Role{auth.RoleUser}, ""))
	require.Equal(t, http.StatusOK, list(t, user, shard("0/2")).StatusCode())
	limited = list(t, user, shard("1/2"))
	p = problem(t, limited.HTTPResponse, limited.Body, http.StatusTooManyRequests, "HYPERFLEET-LMT-002")
	require.Contains(t, deref(p.Detail), "this identity")
}
