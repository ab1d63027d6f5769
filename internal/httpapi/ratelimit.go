package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The rate-limit header fields of draft-ietf-httpapi-ratelimit-headers (docs/rate-limits.md), spelt as
// http.CanonicalHeaderKey does (field names are case-insensitive), so that they are set without being
// canonicalised again on every request.
const (
	headerRateLimitPolicy = "Ratelimit-Policy"
	headerRateLimit       = "Ratelimit"
	headerRetryAfter      = "Retry-After"
)

// maxTrackedBuckets bounds the bucket table; past it, buckets that have refilled (idle ones) are forgotten, which
// costs their owners nothing since a new bucket starts full.
const maxTrackedBuckets = 10000

// routeClass is what a request does, as far as the tenants' budgets go: each class has a bucket of its own, so that
// a tenant's watches and reads go on while its writes wait, and the other way round.
type routeClass uint8

const (
	classReads routeClass = iota
	classWrites
	classWatches
)

// String returns the class's name, which is also its policy's name in the rate-limit headers and its key in the
// rate-limits file.
func (c routeClass) String() string {
	switch c {
	case classWrites:
		return "writes"
	case classWatches:
		return "watches"
	default:
		return "reads"
	}
}

// tenantWho names a tenant's budget for a class in a 429.
var tenantWho = [...]string{classReads: "this tenant's reads", classWrites: "this tenant's writes", classWatches: "this tenant's watches"}

// classOf tells a request's class from its method and query, before any handler runs. A malformed watch parameter
// counts as a read; the handler answers it 400.
func classOf(r *http.Request) routeClass {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		// Parsing the query costs a map; most reads have no watch parameter to find.
		if !strings.Contains(r.URL.RawQuery, "watch") {
			return classReads
		}
		// A malformed watch parameter is the handler's to refuse (400); until then it is a read.
		if watch, err := watchRequested(r); err == nil && watch {
			return classWatches
		}
		return classReads
	default:
		return classWrites
	}
}

// Limit is a token bucket: Rate requests a second on average, up to Burst at once. A zero Rate is unlimited; a zero
// Burst is one second's worth (at least one).
type Limit struct {
	Rate  float64
	Burst int
}

// gcra is a Limit in the terms of the generic cell rate algorithm: a request costs interval, and a bucket may owe
// up to capacity (Burst intervals). Both are bounded so that no sum of them and a time overflows.
type gcra struct {
	interval, capacity int64 // nanoseconds
	burst              int64
}

const (
	maxInterval = int64(1) << 60
	maxCapacity = int64(1) << 61
)

func (l Limit) gcra() gcra {
	burst := int64(l.Burst)
	if burst < 1 {
		burst = int64(math.Min(math.Max(1, math.Ceil(l.Rate)), 1<<31))
	}
	interval := maxInterval
	if ns := float64(time.Second) / l.Rate; ns < float64(maxInterval) {
		interval = max(1, int64(math.Round(ns)))
	}
	capacity := maxCapacity
	if burst <= maxCapacity/interval {
		capacity = burst * interval
	}
	return gcra{interval: interval, capacity: capacity, burst: burst}
}

// verdict is one bucket's answer to one request.
type verdict struct {
	allowed bool
	// remaining is the requests the bucket allows at once after this one (0 when refused).
	remaining int64
	// reset is how long until the bucket is full again; retry, when refused, how long until a request would pass.
	reset, retry time.Duration
	// tat is the bucket's theoretical arrival time once the request is allowed.
	tat int64
}

// take decides a request at now (Unix nanoseconds) against a bucket whose theoretical arrival time is tat: the
// time at which it would be full again, or earlier when it is full (0 for a new bucket). A refused request costs
// nothing.
func (g gcra) take(tat, now int64) verdict {
	base := max(tat, now)
	owed := base - now + g.interval // what the bucket owes if it allows the request
	if owed > g.capacity {
		return verdict{reset: time.Duration(base - now), retry: time.Duration(owed - g.capacity), tat: tat}
	}
	return verdict{allowed: true, remaining: (g.capacity - owed) / g.interval, reset: time.Duration(owed), tat: now + owed}
}

// bucketKind says whose a bucket is.
type bucketKind uint8

const (
	bucketIdentity bucketKind = iota
	bucketAdapter
	// A tenant's buckets, in routeClass order: bucketTenantReads + bucketKind(class).
	bucketTenantReads
	bucketTenantWrites
	bucketTenantWatches
)

// bucketKey names a bucket: an identity's, an adapter identity's shard's, or a tenant's class's.
type bucketKey struct {
	kind  bucketKind
	name  string
	shard string
}

// bucket is one budget a request draws on.
type bucket struct {
	key    bucketKey
	limit  gcra
	policy string // its name in the headers
	who    string // its owner, as a 429 names it
}

// buckets holds every bucket's theoretical arrival time (Unix nanoseconds), and nothing else: a bucket's size comes
// with each request, so changed limits apply at once, to buckets that keep what they owe.
type buckets struct {
	mu   sync.Mutex
	tats map[bucketKey]int64
	max  int
}

func newBuckets(limit int) *buckets { return &buckets{tats: map[bucketKey]int64{}, max: limit} }

// take draws one request from every bucket of bs, or, if any refuses it, from none, and writes each bucket's
// verdict to out (len(out) >= len(bs)). It reports whether every bucket allowed the request.
func (b *buckets) take(now time.Time, bs []bucket, out []verdict) bool {
	at := now.UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	allowed := true
	for i := range bs {
		out[i] = bs[i].limit.take(b.tats[bs[i].key], at)
		allowed = allowed && out[i].allowed
	}
	if !allowed {
		return false
	}
	for i := range bs {
		if _, ok := b.tats[bs[i].key]; !ok && len(b.tats) >= b.max {
			b.forgetFull(at)
		}
		b.tats[bs[i].key] = out[i].tat
	}
	return true
}

// forgetFull removes the buckets that have refilled by at: a new one would be the same.
func (b *buckets) forgetFull(at int64) {
	for k, tat := range b.tats {
		if tat <= at {
			delete(b.tats, k)
		}
	}
}

// rateLimiter is the API's request budgets: per identity, per adapter identity and shard, and per tenant and
// route class.
type rateLimiter struct {
	identity, adapter gcra
	// identityOn and adapterOn say whether those budgets are limited at all.
	identityOn, adapterOn bool
	// tenants returns the tenants' budgets as configured now; nil, or nil from it: unlimited.
	tenants func() *TenantRateLimits
	table   *buckets
	now     func() time.Time
}

// newRateLimiter returns nil when nothing is limited.
func newRateLimiter(cfg Config) *rateLimiter {
	if cfg.RateLimit <= 0 && cfg.AdapterRateLimit <= 0 && cfg.TenantRateLimits == nil {
		return nil
	}
	l := &rateLimiter{tenants: cfg.TenantRateLimits, table: newBuckets(maxTrackedBuckets), now: time.Now}
	if cfg.RateLimit > 0 {
		l.identity, l.identityOn = Limit{Rate: cfg.RateLimit, Burst: cfg.RateBurst}.gcra(), true
	}
	if cfg.AdapterRateLimit > 0 {
		l.adapter, l.adapterOn = Limit{Rate: cfg.AdapterRateLimit, Burst: cfg.AdapterRateBurst}.gcra(), true
	}
	return l
}

// bucketsOf appends the buckets a request draws on to bs. A caller with role adapter draws on the adapters'
// budget alone, one bucket per identity and shard (api.ShardHeader), since one adapter identity's replicas split a
// whole fleet between them and each needs what one fleet shard needs. Anyone else draws on its identity's bucket
// and, when confined to a tenant, on that tenant's bucket for the request's class too: a tenant's users share the
// tenant's budget, and none of them can spend all of it alone.
func (l *rateLimiter) bucketsOf(r *http.Request, bs []bucket) []bucket {
	id, _ := r.Context().Value(callerIdentityKey{}).(auth.Identity)
	if id.HasRole(auth.RoleAdapter) {
		if l.adapterOn {
			bs = append(bs, bucket{key: adapterBucket(id.Subject, r.Header.Get(api.ShardHeader)), limit: l.adapter,
				policy: "adapter", who: "this adapter shard"})
		}
		return bs
	}
	caller := resource.CallerFrom(r.Context())
	if !caller.AllTenants && l.tenants != nil {
		if limits := l.tenants(); limits != nil {
			class := classOf(r)
			if limit := limits.For(caller.Tenant, class); limit.Rate > 0 {
				bs = append(bs, bucket{key: bucketKey{kind: bucketTenantReads + bucketKind(class), name: caller.Tenant},
					limit: limit.gcra(), policy: class.String(), who: tenantWho[class]})
			}
		}
	}
	if l.identityOn {
		bs = append(bs, bucket{key: bucketKey{kind: bucketIdentity, name: caller.Name}, limit: l.identity,
			policy: "identity", who: "this identity"})
	}
	return bs
}

// adapterBucket names an adapter identity's bucket for the shard its replica sent (api.ShardHeader); requests
// without a valid shard share the identity's unsharded bucket. An identity can claim at most api.MaxShardCount
// buckets this way.
func adapterBucket(subject, shard string) bucketKey {
	if index, count, ok := api.ParseShard(shard); ok {
		return bucketKey{kind: bucketAdapter, name: subject, shard: api.FormatShard(index, count)}
	}
	return bucketKey{kind: bucketAdapter, name: subject}
}

// shown picks the bucket the headers describe: of those that refused the request, the one that makes it wait
// longest; else the one with the fewest requests left, then the one that takes longest to refill.
func shown(vs []verdict) int {
	pick := 0
	for i := 1; i < len(vs); i++ {
		a, b := vs[i], vs[pick]
		switch {
		case a.allowed != b.allowed:
			if !a.allowed {
				pick = i
			}
		case !a.allowed:
			if a.retry > b.retry {
				pick = i
			}
		case a.remaining < b.remaining || (a.remaining == b.remaining && a.reset > b.reset):
			pick = i
		}
	}
	return pick
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// setRateLimitHeaders writes the RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers, as
// structured fields) of one bucket: the policy allows q requests at once, refilled over w seconds; r are left, and
// in t seconds the bucket is full again.
func setRateLimitHeaders(h http.Header, b *bucket, v verdict) {
	// Both values are built in one buffer and made one string, which they then share.
	var store [96]byte
	buf := strconv.AppendQuote(store[:0], b.policy)
	buf = append(buf, ";q="...)
	buf = strconv.AppendInt(buf, b.limit.burst, 10)
	buf = append(buf, ";w="...)
	buf = strconv.AppendInt(buf, ceilSeconds(time.Duration(b.limit.capacity)), 10)
	split := len(buf)
	buf = strconv.AppendQuote(buf, b.policy)
	buf = append(buf, ";r="...)
	buf = strconv.AppendInt(buf, v.remaining, 10)
	buf = append(buf, ";t="...)
	buf = strconv.AppendInt(buf, ceilSeconds(v.reset), 10)
	both := string(buf)
	h[headerRateLimitPolicy] = []string{both[:split]}
	h[headerRateLimit] = []string{both[split:]}
}

// rateLimit draws every request on its budgets (bucketsOf) and answers 429 HYPERFLEET-LMT-002 with Retry-After
// once one of them is empty. It runs after authentication, which names the caller. Every limited answer carries
// the RateLimit-Policy and RateLimit fields of the budget closest to exhaustion (shown). The buckets are this
// replica's: behind a load balancer, N replicas allow up to N times every limit (docs/rate-limits.md).
func (s *Handler) rateLimit(next http.Handler) http.Handler {
	l := s.rates
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var store [2]bucket
		bs := l.bucketsOf(r, store[:0])
		if len(bs) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		var vs [2]verdict
		allowed := l.table.take(l.now(), bs, vs[:len(bs)])
		pick := shown(vs[:len(bs)])
		setRateLimitHeaders(w.Header(), &bs[pick], vs[pick])
		if !allowed {
			s.metrics.rateLimited.WithLabelValues(bs[pick].policy).Inc()
			seconds := ceilSeconds(vs[pick].retry)
			w.Header()[headerRetryAfter] = []string{strconv.FormatInt(seconds, 10)}
			writeError(w, r, s.log, resource.Errorf(resource.CodeRateLimited, "too many requests from %s; retry in %d s", bs[pick].who, seconds))
			return
		}
		next.ServeHTTP(w, r)
	})
}
