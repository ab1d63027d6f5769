package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// rateLimitTenantClaim is the token claim that names a caller's tenant in these tests.
const rateLimitTenantClaim = "org_id"

// rateLimitStartTenancy serves with JWT, roles and tenancy (the tenant from org_id) on, and the rate-limits file
// limits; it returns a function minting a token for subject with roles, adapter and tenant ("" for none).
func rateLimitStartTenancy(tb testing.TB, limits string, extra func(*server.Config)) (*apiServer, func(subject string, roles []auth.Role, adapter, tenant string) api.RequestEditorFn) {
	tb.Helper()
	issuer, err := auth.LoadOrCreateDevIssuer(tb.TempDir())
	require.NoError(tb, err)
	file := filepath.Join(tb.TempDir(), "rate-limits.yaml")
	require.NoError(tb, os.WriteFile(file, []byte(limits), 0o600))
	cfg := server.Config{
		RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EnableJWT:        true, EnableAuthz: true,
		JWT:            auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience, TenantClaim: rateLimitTenantClaim},
		RateLimitsFile: file,
	}
	extra(&cfg)
	s := startServerOn(tb, harness.NewDatabase(tb), cfg)
	return s, func(subject string, roles []auth.Role, adapter, tenant string) api.RequestEditorFn {
		var claims []map[string]any
		if tenant != "" {
			claims = append(claims, map[string]any{rateLimitTenantClaim: tenant})
		}
		token, err := issuer.Mint(subject, roles, adapter, time.Hour, testIssuer, testAudience, claims...)
		require.NoError(tb, err)
		return bearer(token)
	}
}

// rateLimitHeaders are an answer's rate-limit fields.
type rateLimitHeaders struct {
	Status                        int
	Policy, RateLimit, RetryAfter string
}

func rateLimitHeadersOf(resp *http.Response) rateLimitHeaders {
	return rateLimitHeaders{Status: resp.StatusCode, Policy: resp.Header.Get("RateLimit-Policy"),
		RateLimit: resp.Header.Get("RateLimit"), RetryAfter: resp.Header.Get("Retry-After")}
}

// A tenant's writes share one budget: once it is spent, its users' writes are 429 with Retry-After while its reads,
// another tenant's writes and the adapters go on. Every limited answer says which budget is closest to exhaustion.
//
// Budgets refill at one request per 100 s, so nothing refills while the test runs; the header values are exact as
// long as the requests of one check come within a second of one another (t and Retry-After are rounded up).
func TestRateLimitTenantBudgetsAreSharedAndSeparate(t *testing.T) {
	s, as := rateLimitStartTenancy(t, "tenants:\n  default: {writes: {rate: 0.01, burst: 2}}\n", func(c *server.Config) {
		c.RateLimit, c.RateBurst = 0.01, 10
		c.AdapterRateLimit, c.AdapterRateBurst = 0.01, 5
	})
	ctx := ctxFor(t)
	alice := as("alice", []auth.Role{auth.RoleUser}, "", "acme")
	amir := as("amir", []auth.Role{auth.RoleUser}, "", "acme")
	bob := as("bob", []auth.Role{auth.RoleUser}, "", "globex")
	applier := as("svc-applier", []auth.Role{auth.RoleAdapter}, "applier", "")
	create := func(name string, who api.RequestEditorFn) *api.CreateClusterResponse {
		t.Helper()
		resp, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: name, Spec: clusterSpec(defaultStream)}, who)
		require.NoError(t, err)
		return resp
	}

	first := create("acme-1", alice)
	require.Equal(t, http.StatusCreated, first.StatusCode(), "body: %s", first.Body)
	require.Equal(t, rateLimitHeaders{201, `"writes";q=2;w=200`, `"writes";r=1;t=100`, ""}, rateLimitHeadersOf(first.HTTPResponse),
		"acme's writes (1 of 2 left) are closer to exhaustion than alice's own budget (9 of 10)")
	second := create("acme-2", amir)
	require.Equal(t, rateLimitHeaders{201, `"writes";q=2;w=200`, `"writes";r=0;t=200`, ""}, rateLimitHeadersOf(second.HTTPResponse),
		"another user of acme draws on the same budget")

	limited := create("acme-3", alice)
	p := problem(t, limited.HTTPResponse, limited.Body, http.StatusTooManyRequests, "HYPERFLEET-LMT-002")
	require.Contains(t, deref(p.Detail), "this tenant's writes")
	require.Equal(t, rateLimitHeaders{429, `"writes";q=2;w=200`, `"writes";r=0;t=200`, "100"}, rateLimitHeadersOf(limited.HTTPResponse))

	// acme's reads have no tenant budget here: alice's own is what is left, less her two allowed requests (the
	// refused one cost nothing).
	list, err := s.ListClustersWithResponse(ctx, nil, alice)
	require.NoError(t, err)
	require.Equal(t, rateLimitHeaders{200, `"identity";q=10;w=1000`, `"identity";r=8;t=200`, ""}, rateLimitHeadersOf(list.HTTPResponse))

	other := create("globex-1", bob)
	require.Equal(t, http.StatusCreated, other.StatusCode(), "body: %s", other.Body)
	require.Equal(t, rateLimitHeaders{201, `"writes";q=2;w=200`, `"writes";r=1;t=100`, ""}, rateLimitHeadersOf(other.HTTPResponse),
		"globex has a budget of its own")

	// The adapters' budget is apart from every tenant's: the applier reports on acme's cluster while acme may not write.
	st, err := s.PostClusterStatusWithResponse(ctx, first.JSON201.Id, report("applier", first.JSON201.Generation, time.Now().UTC(), available("True")), applier)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, st.StatusCode(), "body: %s", st.Body)
	require.Equal(t, rateLimitHeaders{201, `"adapter";q=5;w=500`, `"adapter";r=4;t=100`, ""}, rateLimitHeadersOf(st.HTTPResponse))
}
