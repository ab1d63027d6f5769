package hvclient

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Rate-limit headers Hivelocity sends on every answer. X-RateLimit-Reset is, as Hivelocity documents it, the
// number of seconds until the window resets.
const (
	HeaderRateLimitRemaining = "X-RateLimit-Remaining"
	HeaderRateLimitReset     = "X-RateLimit-Reset"
)

// defaultPause is how long every call pauses after a 429 that says nothing of when the window resets.
const defaultPause = 30 * time.Second

// Hivelocity's documented budget: 3,600 calls an hour per client IP.
const (
	// Window is the length of Hivelocity's rate-limit window. No pause lasts longer: whatever an answer says,
	// the window has reset by then, and a header that promises more (a clock far off, a misread value) must not
	// stop the provisioner for longer than that.
	Window = time.Hour
	// DefaultAccountRPS is the account's budget the provisioner aims at by default: 3,600 an hour is 1 a
	// second, less a margin for the operator's own calls.
	DefaultAccountRPS = 0.9
	// DefaultAccountBurst is the account's burst by default.
	DefaultAccountBurst = 10
	// MinBurst is the smallest burst that works: a claim reserves its check and its write together.
	MinBurst = 2
)

// Share returns one replica's part of the account's budget when shards replicas share it (behind one egress IP,
// Hivelocity counts them as one): the rate divided by the shard count, and the burst likewise but never below
// MinBurst. An account rate of 0 or less means no budget, and stays so. shards below 1 count as 1.
func Share(accountRPS float64, accountBurst, shards int) (rps float64, burst int) {
	shards = max(shards, 1)
	if accountRPS > 0 {
		rps = accountRPS / float64(shards)
	}
	return rps, max(accountBurst/shards, MinBurst)
}

type (
	sendByKey  struct{}
	prepaidKey struct{}
)

// prepaid counts requests whose budget was taken in advance (Client.Reserve).
type prepaid struct{ left atomic.Int32 }

// take uses one prepaid request, if any is left.
func (p *prepaid) take() bool {
	for {
		n := p.left.Load()
		if n <= 0 {
			return false
		}
		if p.left.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// SendBy returns a context whose requests are sent no later than t: a request still waiting for the request
// budget at t fails with ErrLate without reaching the API. Unlike a context deadline it never cancels a request
// already sent, so the caller knows a write either was not made or was made before t. The claim protocol relies
// on it to bound the time between its check and its write.
func SendBy(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, sendByKey{}, t)
}

func sendByOf(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(sendByKey{}).(time.Time)
	return t, ok
}

// throttle keeps every request of one Client under one budget: a token bucket, and after a 429 (or an answer
// saying no request is left) a pause of every request until the rate-limit window resets. A paused request fails
// at once with ErrRateLimited rather than blocking a worker for what may be an hour.
type throttle struct {
	base    http.RoundTripper
	limiter *rate.Limiter
	now     func() time.Time

	mu    sync.Mutex
	until time.Time
}

func newThrottle(base http.RoundTripper, rps float64, burst int) *throttle {
	limit := rate.Limit(rps)
	if rps <= 0 {
		limit = rate.Inf
	}
	return &throttle{base: base, limiter: rate.NewLimiter(limit, max(burst, 1)), now: time.Now}
}

// pausedFor returns how much of a rate-limit pause is left.
func (t *throttle) pausedFor() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.until.Sub(t.now()), 0)
}

func (t *throttle) pauseFor(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until := t.now().Add(d); until.After(t.until) {
		t.until = until
	}
}

func (t *throttle) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	by, bounded := sendByOf(ctx)
	if p, ok := ctx.Value(prepaidKey{}).(*prepaid); !ok || !p.take() {
		if err := t.wait(ctx, by, bounded); err != nil {
			return nil, err
		}
	}
	if bounded && t.now().After(by) {
		return nil, &Error{kind: ErrLate, Message: "the request budget did not allow it in time"}
	}
	return t.send(req)
}

// wait takes one request's budget, failing at once while calls are paused, and failing rather than waiting past
// the send deadline (ErrLate) or the caller's deadline (ErrRateLimited).
func (t *throttle) wait(ctx context.Context, by time.Time, bounded bool) error {
	if d := t.pausedFor(); d > 0 {
		return &Error{kind: ErrRateLimited, RetryAfter: d, Message: "every call pauses until the rate-limit window resets"}
	}
	waitCtx := ctx
	if bounded {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	if err := t.limiter.Wait(waitCtx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if deadline, ok := ctx.Deadline(); bounded && (!ok || by.Before(deadline)) {
			return &Error{kind: ErrLate, Message: "the request budget did not allow it in time"}
		}
		return &Error{kind: ErrRateLimited, RetryAfter: t.interval(), Message: "the request budget does not allow it before the caller's deadline"}
	}
	return nil
}

// reserve waits for n requests' worth of budget (n at most the burst) and returns a context whose next n
// requests go out without waiting for it. A send deadline on ctx (SendBy) bounds the wait too (ErrLate).
func (t *throttle) reserve(ctx context.Context, n int) (context.Context, error) {
	if d := t.pausedFor(); d > 0 {
		return nil, &Error{kind: ErrRateLimited, RetryAfter: d, Message: "every call pauses until the rate-limit window resets"}
	}
	waitCtx := ctx
	by, bounded := sendByOf(ctx)
	if bounded {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	if err := t.limiter.WaitN(waitCtx, n); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case bounded:
			return nil, &Error{kind: ErrLate, Message: fmt.Sprintf("the request budget did not allow %d requests in time", n)}
		}
		return nil, &Error{kind: ErrRateLimited, RetryAfter: t.interval(), Message: fmt.Sprintf("the request budget does not allow %d requests: %v", n, err)}
	}
	p := &prepaid{}
	p.left.Store(int32(min(n, math.MaxInt32))) //nolint:gosec // bounded just before
	return context.WithValue(ctx, prepaidKey{}, p), nil
}

// send sends req, after the budget was taken, and pauses every request if the answer says so.
func (t *throttle) send(req *http.Request) (*http.Response, error) {
	if d := t.pausedFor(); d > 0 {
		return nil, &Error{kind: ErrRateLimited, RetryAfter: d, Message: "every call pauses until the rate-limit window resets"}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if d, ok := pauseAfter(resp.StatusCode, resp.Header, t.now()); ok {
		t.pauseFor(d)
	}
	return resp, nil
}

// interval is the time between two tokens at the budget's rate.
func (t *throttle) interval() time.Duration {
	l := t.limiter.Limit()
	if l == rate.Inf || l <= 0 {
		return time.Second
	}
	return time.Duration(float64(time.Second) / float64(l))
}

// pauseAfter decides whether an answer pauses every call, and for how long: a 429 until its X-RateLimit-Reset
// (defaultPause without one), and any answer with X-RateLimit-Remaining 0 until its reset, since the next call
// would only earn a 429. No pause is longer than Window.
func pauseAfter(status int, h http.Header, now time.Time) (time.Duration, bool) {
	reset, hasReset := resetAfter(h.Get(HeaderRateLimitReset), now)
	switch {
	case status == http.StatusTooManyRequests && hasReset:
		return min(max(reset, time.Second), Window), true
	case status == http.StatusTooManyRequests:
		return min(defaultPause, Window), true
	case strings.TrimSpace(h.Get(HeaderRateLimitRemaining)) == "0" && hasReset && reset > 0:
		return min(reset, Window), true
	}
	return 0, false
}

// unixThreshold tells a Unix time from a number of seconds in X-RateLimit-Reset: no window lasts 30 years.
const unixThreshold = 1e9

// resetAfter reads X-RateLimit-Reset: the seconds until the window resets, as Hivelocity documents it. A value
// too large to be a duration is taken for the Unix time of the reset, as some APIs send it. ok is false for a
// missing or malformed value.
func resetAfter(v string, now time.Time) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	if f >= unixThreshold {
		return max(time.Unix(0, int64(f*float64(time.Second))).Sub(now), 0), true
	}
	return time.Duration(f * float64(time.Second)), true
}
