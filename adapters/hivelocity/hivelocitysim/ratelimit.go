package hivelocitysim

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// Rate-limit headers Hivelocity sends on every response.
const (
	HeaderRateLimitLimit     = "X-RateLimit-Limit"
	HeaderRateLimitRemaining = "X-RateLimit-Remaining"
	HeaderRateLimitReset     = "X-RateLimit-Reset"
)

// anonymousBucket is the budget shared by requests without a valid API key.
const anonymousBucket = "anonymous"

// bucket is one budget window: it starts with the first request after the previous window ended.
type bucket struct {
	start time.Time
	used  int
}

// rateState is what the rate-limit headers of one answer say.
type rateState struct {
	limit     int
	remaining int
	reset     time.Time
}

// charge takes one request from the budget of key (a KeyID, or anonymousBucket) at now. It reports the state for
// the headers and whether the request is within budget; over budget, nothing is taken. With rate limiting off it
// returns ok and a nil state. Callers hold s.mu.
func (s *Simulator) charge(key string, now time.Time) (*rateState, bool) {
	limit := s.rate.Limit
	if limit == 0 {
		return nil, true
	}
	if key == anonymousBucket && s.rate.AnonymousLimit > 0 {
		limit = s.rate.AnonymousLimit
	}
	b := s.buckets[key]
	if b == nil || !now.Before(b.start.Add(s.rate.Window)) {
		b = &bucket{start: now}
		s.buckets[key] = b
	}
	st := &rateState{limit: limit, reset: b.start.Add(s.rate.Window)}
	if b.used >= limit {
		return st, false
	}
	b.used++
	st.remaining = limit - b.used
	return st, true
}

// peek returns the budget state of key without taking from it, for answers that use no budget. Callers hold s.mu.
func (s *Simulator) peek(key string, now time.Time) *rateState {
	limit := s.rate.Limit
	if key == anonymousBucket && s.rate.AnonymousLimit > 0 {
		limit = s.rate.AnonymousLimit
	}
	st := &rateState{limit: limit, remaining: limit, reset: now.Add(s.rate.Window)}
	if b := s.buckets[key]; b != nil && now.Before(b.start.Add(s.rate.Window)) {
		st.remaining, st.reset = max(limit-b.used, 0), b.start.Add(s.rate.Window)
	}
	return st
}

// setHeaders writes the rate-limit headers of st at now. X-RateLimit-Reset is the documented number of whole
// seconds until the window ends, rounded up, or with ResetUnix the Unix second of the window's end, rounded up.
// Callers hold s.mu.
func (s *Simulator) setHeaders(h http.Header, st *rateState, now time.Time) {
	if st == nil {
		return
	}
	h.Set(HeaderRateLimitLimit, strconv.Itoa(st.limit))
	h.Set(HeaderRateLimitRemaining, strconv.Itoa(st.remaining))
	var reset int64
	if s.rate.ResetUnix {
		reset = int64(math.Ceil(float64(st.reset.UnixNano()) / float64(time.Second)))
	} else {
		reset = max(int64(math.Ceil(st.reset.Sub(now).Seconds())), 0)
	}
	h.Set(HeaderRateLimitReset, strconv.FormatInt(reset, 10))
}
