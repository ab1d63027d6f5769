package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyperfleet/hyperfleet/internal/resource"
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
// the bucket is the caller's identity.
func (s *Handler) rateLimit(next http.Handler) http.Handler {
	if s.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := s.limiter.wait(resource.CallerFrom(r.Context()).Name, time.Now()); d > 0 {
			seconds := int(math.Ceil(d.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(seconds))
			writeError(w, r, s.log, resource.Errorf(resource.CodeRateLimited, "too many requests from this identity; retry in %d s", seconds))
			return
		}
		next.ServeHTTP(w, r)
	})
}
