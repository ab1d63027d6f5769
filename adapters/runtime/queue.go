package adapter

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Backoff bounds of a key whose reconciles keep failing.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	// backoffJitter spreads retries of keys that failed together (one outage) by up to ±10 %.
	backoffJitter = 0.1
)

// jitteredBackoff is a per-key exponential backoff with jitter: base·2^failures, at most max, spread by ±10 %
// (never beyond max). It is the queue's rate limiter.
type jitteredBackoff struct {
	base, max time.Duration
	rand      func() float64 // [0, 1)

	mu       sync.Mutex
	failures map[Key]int
}

var _ workqueue.TypedRateLimiter[Key] = (*jitteredBackoff)(nil)

func newJitteredBackoff(base, max time.Duration, rnd func() float64) *jitteredBackoff {
	if rnd == nil {
		rnd = rand.Float64
	}
	return &jitteredBackoff{base: base, max: max, rand: rnd, failures: map[Key]int{}}
}

// When records one more failure of key and returns how long to wait before retrying it.
func (b *jitteredBackoff) When(key Key) time.Duration {
	b.mu.Lock()
	n := b.failures[key]
	b.failures[key] = n + 1
	b.mu.Unlock()
	d := float64(b.max)
	if n < 62 {
		d = math.Min(float64(b.base)*math.Exp2(float64(n)), float64(b.max))
	}
	d *= 1 + backoffJitter*(2*b.rand()-1)
	return time.Duration(math.Min(d, float64(b.max)))
}

// Forget clears key's failures: its next failure starts again at base.
func (b *jitteredBackoff) Forget(key Key) {
	b.mu.Lock()
	delete(b.failures, key)
	b.mu.Unlock()
}

// NumRequeues returns key's failures since it was last forgotten.
func (b *jitteredBackoff) NumRequeues(key Key) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures[key]
}

// workQueue is client-go's rate-limiting work queue (a key is never handed to two workers, duplicates
// coalesce, delayed adds) plus the time each key is scheduled for, so that a poll does not pull forward a
// re-check the reconciler asked for.
type workQueue struct {
	workqueue.TypedRateLimitingInterface[Key]
	limiter workqueue.TypedRateLimiter[Key]
	clock   clock.Clock

	mu        sync.Mutex
	scheduled map[Key]time.Time
}

func newWorkQueue(limiter workqueue.TypedRateLimiter[Key], clk clock.WithTicker) *workQueue {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[Key]{Clock: clk})
	return &workQueue{TypedRateLimitingInterface: q, limiter: limiter, clock: clk, scheduled: map[Key]time.Time{}}
}

// offer adds a key a poll found, unless it is already scheduled for later; it reports whether it was added.
func (q *workQueue) offer(key Key) bool {
	q.mu.Lock()
	at, ok := q.scheduled[key]
	if ok && q.clock.Now().Before(at) {
		q.mu.Unlock()
		return false
	}
	delete(q.scheduled, key)
	q.mu.Unlock()
	q.Add(key)
	return true
}

// schedule adds key after d and remembers when.
func (q *workQueue) schedule(key Key, d time.Duration) {
	q.mu.Lock()
	q.scheduled[key] = q.clock.Now().Add(d)
	q.mu.Unlock()
	q.AddAfter(key, d)
}

// retry adds key after its next backoff delay.
func (q *workQueue) retry(key Key) {
	q.schedule(key, q.backoff(key))
}

// backoff returns key's next backoff delay through the rate limiter (counting one more failure).
func (q *workQueue) backoff(key Key) time.Duration {
	// AddRateLimited would not let us record the time; When is what it calls.
	return q.limiter.When(key)
}

// settle forgets key's failures and its schedule: it reconciled successfully and needs nothing until polled
// again.
func (q *workQueue) settle(key Key) {
	q.mu.Lock()
	delete(q.scheduled, key)
	q.mu.Unlock()
	q.Forget(key)
}
