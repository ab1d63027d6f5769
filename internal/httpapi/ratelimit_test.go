package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

var rateLimitEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestGCRA(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		// at are the requests' times after the start; want their verdicts (tat left out).
		at   []time.Duration
		want []verdict
	}{
		{name: "burst, then a token per interval", limit: Limit{Rate: 2, Burst: 2},
			at: []time.Duration{0, 0, 0, 250 * time.Millisecond, 500 * time.Millisecond},
			want: []verdict{
				{allowed: true, remaining: 1, reset: 500 * time.Millisecond},
				{allowed: true, remaining: 0, reset: time.Second},
				{reset: time.Second, retry: 500 * time.Millisecond},
				{reset: 750 * time.Millisecond, retry: 250 * time.Millisecond},
				{allowed: true, remaining: 0, reset: time.Second},
			}},
		{name: "an idle bucket refills, and no further", limit: Limit{Rate: 1, Burst: 3},
			at: []time.Duration{0, 0, time.Hour, time.Hour},
			want: []verdict{
				{allowed: true, remaining: 2, reset: time.Second},
				{allowed: true, remaining: 1, reset: 2 * time.Second},
				{allowed: true, remaining: 2, reset: time.Second},
				{allowed: true, remaining: 1, reset: 2 * time.Second},
			}},
		{name: "burst 0 is one second's worth", limit: Limit{Rate: 3},
			at: []time.Duration{0, 0, 0, 0},
			want: []verdict{
				{allowed: true, remaining: 2, reset: 333333333},
				{allowed: true, remaining: 1, reset: 666666666},
				{allowed: true, remaining: 0, reset: 999999999},
				{reset: 999999999, retry: 333333333},
			}},
		{name: "under one a second", limit: Limit{Rate: 0.5, Burst: 1},
			at: []time.Duration{0, time.Second, 2 * time.Second},
			want: []verdict{
				{allowed: true, remaining: 0, reset: 2 * time.Second},
				{reset: time.Second, retry: time.Second},
				{allowed: true, remaining: 0, reset: 2 * time.Second},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.limit.gcra()
			var tat int64
			for i, at := range tt.at {
				v := g.take(tat, rateLimitEpoch.Add(at).UnixNano())
				tat = v.tat
				v.tat = 0
				require.Equal(t, tt.want[i], v, "request %d at %s", i, at)
			}
		})
	}
}

func TestGCRABoundsExtremeLimits(t *testing.T) {
	for _, l := range []Limit{{Rate: 1e-12, Burst: 1 << 30}, {Rate: 1e12, Burst: 1}, {Rate: 1e-300}} {
		g := l.gcra()
		require.Positive(t, g.interval, "%+v", l)
		require.LessOrEqual(t, g.capacity, maxCapacity, "%+v", l)
		now := rateLimitEpoch.UnixNano()
		v := g.take(0, now)
		require.True(t, v.allowed, "%+v", l)
		require.GreaterOrEqual(t, v.tat, now, "%+v: no overflow", l)
	}
}

func TestBucketsTakeFromAllOrNone(t *testing.T) {
	b := newBuckets(10)
	wide, narrow := Limit{Rate: 1, Burst: 5}.gcra(), Limit{Rate: 1, Burst: 1}.gcra()
	tenant := bucket{key: bucketKey{kind: bucketTenantWrites, name: "acme"}, limit: wide}
	alice := bucket{key: bucketKey{kind: bucketIdentity, name: "alice"}, limit: narrow}
	bob := bucket{key: bucketKey{kind: bucketIdentity, name: "bob"}, limit: narrow}
	out := make([]verdict, 2)
	require.True(t, b.take(rateLimitEpoch, []bucket{tenant, alice}, out))
	require.Equal(t, int64(4), out[0].remaining)
	require.False(t, b.take(rateLimitEpoch, []bucket{tenant, alice}, out), "alice's own bucket is empty")
	require.True(t, out[0].allowed, "the tenant's would have allowed it")
	require.True(t, b.take(rateLimitEpoch, []bucket{tenant, bob}, out))
	require.Equal(t, int64(3), out[0].remaining, "alice's refused request cost the tenant nothing")
}

func TestBucketsForgetFullBucketsWhenFull(t *testing.T) {
	b := newBuckets(maxTrackedBuckets)
	one := Limit{Rate: 1, Burst: 1}.gcra()
	out := make([]verdict, 1)
	for i := range maxTrackedBuckets {
		require.True(t, b.take(rateLimitEpoch, []bucket{{key: bucketKey{name: fmt.Sprint(i)}, limit: one}}, out))
	}
	// A second later every bucket is full again, so a newcomer makes room by forgetting them.
	require.True(t, b.take(rateLimitEpoch.Add(time.Second), []bucket{{key: bucketKey{name: "newcomer"}, limit: one}}, out))
	require.Len(t, b.tats, 1)
}

func TestClassOf(t *testing.T) {
	tests := []struct {
		method, target string
		want           routeClass
	}{
		{http.MethodGet, "/api/hyperfleet/v1/clusters", classReads},
		{http.MethodGet, "/api/hyperfleet/v1/clusters?watch=true", classWatches},
		{http.MethodGet, "/api/hyperfleet/v1/clusters?watch=1", classWatches},
		{http.MethodGet, "/api/hyperfleet/v1/clusters?watch=false", classReads},
		{http.MethodGet, "/api/hyperfleet/v1/clusters?watch=maybe", classReads},
		{http.MethodHead, "/api/hyperfleet/v1/clusters/x", classReads},
		{http.MethodPost, "/api/hyperfleet/v1/clusters?watch=true", classWrites},
		{http.MethodPut, "/api/hyperfleet/v1/clusters/x/statuses", classWrites},
		{http.MethodPatch, "/api/hyperfleet/v1/clusters/x", classWrites},
		{http.MethodDelete, "/api/hyperfleet/v1/clusters/x", classWrites},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			require.Equal(t, tt.want, classOf(httptest.NewRequest(tt.method, tt.target, http.NoBody)))
		})
	}
}

func TestShown(t *testing.T) {
	tests := []struct {
		name string
		vs   []verdict
		want int
	}{
		{"one", []verdict{{allowed: true, remaining: 3}}, 0},
		{"fewest left", []verdict{{allowed: true, remaining: 3}, {allowed: true, remaining: 1}}, 1},
		{"same left: slowest to refill", []verdict{{allowed: true, remaining: 1, reset: time.Second}, {allowed: true, remaining: 1, reset: 2 * time.Second}}, 1},
		{"same left and refill: the first", []verdict{{allowed: true, remaining: 1, reset: time.Second}, {allowed: true, remaining: 1, reset: time.Second}}, 0},
		{"the refusal", []verdict{{retry: time.Second}, {allowed: true}}, 0},
		{"the longest refusal", []verdict{{retry: time.Second}, {retry: 3 * time.Second}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, shown(tt.vs))
		})
	}
}

// rateLimitCallers are the identities the middleware tests send requests as.
var rateLimitCallers = map[string]auth.Identity{
	"alice": {Subject: "alice", Roles: []auth.Role{auth.RoleUser}, Tenant: "acme"},
	"bob":   {Subject: "bob", Roles: []auth.Role{auth.RoleUser}, Tenant: "acme"},
	"carol": {Subject: "carol", Roles: []auth.Role{auth.RoleUser}, Tenant: "globex"},
	"root":  {Subject: "root", Roles: []auth.Role{auth.RoleAdmin}, Tenant: "acme"},
	"svc":   {Subject: "svc", Roles: []auth.Role{auth.RoleAdapter}, Adapter: "applier"},
}

// rateLimitStep is one request and the answer it should get ("" for a header that must be absent).
type rateLimitStep struct {
	who, method, target string
	at                  time.Duration
	status              int
	policy, limit       string
	retryAfter          string
}

// rateLimitHandler serves 200 behind authentication (the caller named by the X-Test-Caller header) and the rate
// limit configured by cfg, on a clock that the returned pointer sets, counting in the returned metrics.
func rateLimitHandler(tb testing.TB, cfg Config) (http.Handler, *time.Time, *httpMetrics) {
	tb.Helper()
	cfg.Authorize, cfg.Tenancy = true, true
	cfg.Authenticate = func(r *http.Request) (auth.Identity, error) {
		id, ok := rateLimitCallers[r.Header.Get("X-Test-Caller")]
		require.True(tb, ok, "unknown caller %q", r.Header.Get("X-Test-Caller"))
		return id, nil
	}
	now := rateLimitEpoch
	m, err := newHTTPMetrics(nil)
	require.NoError(tb, err)
	s := &Handler{cfg: cfg, log: slog.New(slog.DiscardHandler), rates: newRateLimiter(cfg), metrics: m}
	if s.rates != nil {
		s.rates.now = func() time.Time { return now }
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return s.authenticate(s.rateLimit(ok)), &now, m
}

func limitsFile(tb testing.TB, yaml string) func() *TenantRateLimits {
	tb.Helper()
	l, err := parseTenantRateLimits([]byte(yaml))
	require.NoError(tb, err)
	return func() *TenantRateLimits { return l }
}

func TestRateLimitHeaders(t *testing.T) {
	const clusters = "/api/hyperfleet/v1/clusters"
	tenants := limitsFile(t, `
tenants:
  default: {reads: {rate: 10, burst: 10}, writes: {rate: 1, burst: 2}, watches: {rate: 0.5, burst: 3}}
  overrides:
    globex: {writes: {rate: 100}}
`)
	tests := []struct {
		name  string
		cfg   Config
		steps []rateLimitStep
	}{
		{name: "the tenant's writes are closest to exhaustion, then refuse", cfg: Config{RateLimit: 10, RateBurst: 10, TenantRateLimits: tenants},
			steps: []rateLimitStep{
				{"alice", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=1;t=1`, ""},
				{"alice", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=0;t=2`, ""},
				{"bob", http.MethodPatch, clusters + "/x", 0, 429, `"writes";q=2;w=2`, `"writes";r=0;t=2`, "1"},
				{"bob", http.MethodDelete, clusters + "/x", 1500 * time.Millisecond, 200, `"writes";q=2;w=2`, `"writes";r=0;t=2`, ""},
			}},
		{name: "classes have buckets of their own", cfg: Config{TenantRateLimits: tenants},
			steps: []rateLimitStep{
				{"alice", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=1;t=1`, ""},
				{"alice", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=0;t=2`, ""},
				{"alice", http.MethodPost, clusters, 0, 429, `"writes";q=2;w=2`, `"writes";r=0;t=2`, "1"},
				{"alice", http.MethodGet, clusters, 0, 200, `"reads";q=10;w=1`, `"reads";r=9;t=1`, ""},
				{"alice", http.MethodGet, clusters + "?watch=true", 0, 200, `"watches";q=3;w=6`, `"watches";r=2;t=2`, ""},
			}},
		{name: "tenants have buckets of their own, and overrides", cfg: Config{TenantRateLimits: tenants},
			steps: []rateLimitStep{
				{"alice", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=1;t=1`, ""},
				{"alice", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=0;t=2`, ""},
				{"carol", http.MethodPost, clusters, 0, 200, `"writes";q=100;w=1`, `"writes";r=99;t=1`, ""},
				{"carol", http.MethodGet, clusters, 0, 200, `"reads";q=10;w=1`, `"reads";r=9;t=1`, ""},
			}},
		{name: "one user cannot spend the tenant's budget", cfg: Config{RateLimit: 1, RateBurst: 1, TenantRateLimits: tenants},
			steps: []rateLimitStep{
				{"alice", http.MethodPost, clusters, 0, 200, `"identity";q=1;w=1`, `"identity";r=0;t=1`, ""},
				{"alice", http.MethodPost, clusters, 0, 429, `"identity";q=1;w=1`, `"identity";r=0;t=1`, "1"},
				// alice's refused request cost the tenant nothing: one write is left for bob.
				{"bob", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=0;t=2`, ""},
				{"bob", http.MethodGet, clusters, 2 * time.Second, 200, `"identity";q=1;w=1`, `"identity";r=0;t=1`, ""},
			}},
		{name: "the longer wait is the one told", cfg: Config{RateLimit: 1, RateBurst: 1,
			TenantRateLimits: limitsFile(t, "tenants: {default: {writes: {rate: 0.5, burst: 2}}}")},
			steps: []rateLimitStep{
				{"alice", http.MethodPost, clusters, 0, 200, `"identity";q=1;w=1`, `"identity";r=0;t=1`, ""},
				// Both have no request left; the tenant's takes longer to refill.
				{"bob", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=4`, `"writes";r=0;t=4`, ""},
				// alice waits 0.9 s for her own bucket, 1.9 s for the tenant's.
				{"alice", http.MethodPost, clusters, 100 * time.Millisecond, 429, `"writes";q=2;w=4`, `"writes";r=0;t=4`, "2"},
			}},
		{name: "admins are limited per identity alone", cfg: Config{RateLimit: 2, RateBurst: 2, TenantRateLimits: tenants},
			steps: []rateLimitStep{
				{"root", http.MethodPost, clusters, 0, 200, `"identity";q=2;w=1`, `"identity";r=1;t=1`, ""},
				{"root", http.MethodPost, clusters, 0, 200, `"identity";q=2;w=1`, `"identity";r=0;t=1`, ""},
				{"root", http.MethodPost, clusters, 0, 429, `"identity";q=2;w=1`, `"identity";r=0;t=1`, "1"},
			}},
		{name: "adapters have their own budget per shard", cfg: Config{RateLimit: 1, RateBurst: 1, AdapterRateLimit: 0.25, AdapterRateBurst: 2, TenantRateLimits: tenants},
			steps: []rateLimitStep{
				// acme's writes are spent; the adapter's budget is its own.
				{"alice", http.MethodPost, clusters, 0, 200, `"identity";q=1;w=1`, `"identity";r=0;t=1`, ""},
				{"bob", http.MethodPost, clusters, 0, 200, `"writes";q=2;w=2`, `"writes";r=0;t=2`, ""},
				{"svc", http.MethodPut, clusters + "/x/statuses", 0, 200, `"adapter";q=2;w=8`, `"adapter";r=1;t=4`, ""},
				{"svc", http.MethodPut, clusters + "/x/statuses", 0, 200, `"adapter";q=2;w=8`, `"adapter";r=0;t=8`, ""},
				{"svc", http.MethodGet, clusters, time.Second, 429, `"adapter";q=2;w=8`, `"adapter";r=0;t=7`, "3"},
			}},
		{name: "nothing limited, nothing said", cfg: Config{TenantRateLimits: limitsFile(t, "tenants: {default: {writes: {rate: 1}}}")},
			steps: []rateLimitStep{
				{"alice", http.MethodGet, clusters, 0, 200, "", "", ""},
				{"root", http.MethodPost, clusters, 0, 200, "", "", ""},
				{"svc", http.MethodPost, clusters, 0, 200, "", "", ""},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, now, m := rateLimitHandler(t, tt.cfg)
			refused := map[string]float64{}
			for i, s := range tt.steps {
				*now = rateLimitEpoch.Add(s.at)
				req := httptest.NewRequest(s.method, s.target, http.NoBody)
				req.Header.Set("X-Test-Caller", s.who)
				if s.who == "svc" {
					req.Header.Set(api.ShardHeader, "0/1")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				got := rateLimitStep{who: s.who, method: s.method, target: s.target, at: s.at, status: rec.Code,
					policy: rec.Header().Get("RateLimit-Policy"), limit: rec.Header().Get("RateLimit"), retryAfter: rec.Header().Get("Retry-After")}
				require.Equal(t, s, got, "step %d: %s", i, rec.Body)
				if rec.Code == http.StatusTooManyRequests {
					require.Contains(t, rec.Body.String(), "HYPERFLEET-LMT-002")
					policy, _, _ := strings.Cut(strings.TrimPrefix(s.policy, `"`), `"`)
					refused[policy]++
				}
			}
			for _, policy := range []string{"identity", "adapter", "reads", "writes", "watches"} {
				require.Equal(t, refused[policy], testutil.ToFloat64(m.rateLimited.WithLabelValues(policy)),
					"hyperfleet_api_rate_limited_total{policy=%q}", policy)
			}
		})
	}
}

func TestRateLimitFollowsAReloadedFile(t *testing.T) {
	current, err := parseTenantRateLimits([]byte("tenants: {default: {writes: {rate: 1, burst: 1}}}"))
	require.NoError(t, err)
	h, _, _ := rateLimitHandler(t, Config{TenantRateLimits: func() *TenantRateLimits { return current }})
	post := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/hyperfleet/v1/clusters", http.NoBody)
		req.Header.Set("X-Test-Caller", "alice")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	require.Equal(t, http.StatusOK, post().Code)
	require.Equal(t, http.StatusTooManyRequests, post().Code)
	// A larger burst applies at once, to a bucket that keeps what it owes.
	current, err = parseTenantRateLimits([]byte("tenants: {default: {writes: {rate: 1, burst: 3}}}"))
	require.NoError(t, err)
	rec := post()
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, `"writes";r=1;t=2`, rec.Header().Get("RateLimit"))
}

// BenchmarkRateLimit measures the middleware for a caller confined to a tenant, who draws on two buckets, with
// as many callers as the table tracks in turn.
func BenchmarkRateLimit(b *testing.B) {
	tenants, err := parseTenantRateLimits([]byte("tenants: {default: {reads: {rate: 1e9, burst: 1000000}}}"))
	require.NoError(b, err)
	cfg := Config{RateLimit: 1e9, RateBurst: 1000000, TenantRateLimits: func() *TenantRateLimits { return tenants }, Authorize: true, Tenancy: true}
	s := &Handler{cfg: cfg, log: slog.New(slog.DiscardHandler), rates: newRateLimiter(cfg)}
	h := s.rateLimit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		id := auth.Identity{Subject: fmt.Sprint("user-", i), Roles: []auth.Role{auth.RoleUser}, Tenant: fmt.Sprint("tenant-", i%50)}
		r := httptest.NewRequest(http.MethodGet, "/api/hyperfleet/v1/clusters?size=10", http.NoBody)
		reqs[i] = r.WithContext(withTestCaller(r.Context(), s, id))
	}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h.ServeHTTP(w, reqs[i%len(reqs)])
	}
}

// withTestCaller is ctx as authenticate leaves it for id.
func withTestCaller(ctx context.Context, s *Handler, id auth.Identity) context.Context {
	return context.WithValue(resource.WithCaller(ctx, s.callerOf(id)), callerIdentityKey{}, id)
}
