package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// maxTrackedIdentities bounds the limiter table; past it, identities whose bucket has refilled (idle ones) are
// forgotten, which costs them nothing since a new bucket starts full.
const maxTrackedIdentities = 10000

// identityLimiter gives every identity its own token bucket, so one noisy client cannot starve the others.
type identityLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newIdentityLimiter(perSecond float64, burst int) *identityLimiter {
	if burst < 1 {
		burst = int(math.Max(1, math.Ceil(perSecond)))
	}
	return &identityLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*rate.Limiter{}}
}

// wait returns how long identity must wait before its next request is allowed; zero means go ahead (and the
// request has used a token).
func (l *identityLimiter) wait(identity string, now time.Time) time.Duration {
	l.mu.Lock()
	b, ok := l.buckets[identity]
	if !ok {
		if len(l.buckets) >= maxTrackedIdentities {
			for id, other := range l.buckets {
				if other.TokensAt(now) >= float64(l.burst) {
					delete(l.buckets, id)
				}
			}
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[identity] = b
	}
	l.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// rateLimit answers 429 with Retry-After once the caller's bucket is empty. It runs after authentication, so
// the bucket is the caller's identity; a caller with role adapter draws on the adapters' budget instead, one bucket
// per identity and shard (api.ShardHeader), since one adapter identity's replicas split a whole fleet between them
// and each needs what one fleet shard needs. The buckets are this replica's: behind a load balancer an identity
// may make up to the limit times the number of replicas.
func (s *Handler) rateLimit(next http.Handler) http.Handler {
	if s.limiter == nil && s.adapterLimiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limiter, key, who := s.limiter, resource.CallerFrom(r.Context()).Name, "this identity"
		if id, _ := r.Context().Value(callerIdentityKey{}).(auth.Identity); id.HasRole(auth.RoleAdapter) {
			limiter, key, who = s.adapterLimiter, adapterBucket(id.Subject, r.Header.Get(api.ShardHeader)), "this adapter shard"
		}
		if limiter == nil {
			next.ServeHTTP(w, r)
			return
		}
		if d := limiter.wait(key, time.Now()); d > 0 {
			seconds := int(math.Ceil(d.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(seconds))
			writeError(w, r, s.log, resource.Errorf(resource.CodeRateLimited, "too many requests from %s; retry in %d s", who, seconds))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adapterBucket names an adapter identity's bucket for the shard its replica sent (api.ShardHeader); requests
// without a valid shard share the identity's unsharded bucket. An identity can claim at most api.MaxShardCount
// buckets this way.
func adapterBucket(subject, shard string) string {
	if index, count, ok := api.ParseShard(shard); ok {
		return subject + "\x00" + api.FormatShard(index, count)
	}
	return subject + "\x00"
}
