package adapter

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Key identifies one resource in the work queue.
type Key struct {
	Kind     string // the kind's Plural
	ID       string
	ParentID string // the parent's id for a child kind
}

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

func newJitteredBackoff(base, ceiling time.Duration, rnd func() float64) *jitteredBackoff {
	if rnd == nil {
		rnd = rand.Float64
	}
	return &jitteredBackoff{base: base, max: ceiling, rand: rnd, failures: map[Key]int{}}
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
	scheduled map[Key]schedule
	// inflight holds the keys workers are processing and the generation each fetched (0 until it has).
	inflight map[Key]int64
}

// schedule is when a key is due again, and the generation it was last processed at (0: unknown).
type schedule struct {
	at         time.Time
	generation int64
}

func newWorkQueue(limiter workqueue.TypedRateLimiter[Key], clk clock.WithTicker) *workQueue {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[Key]{Clock: clk})
	return &workQueue{TypedRateLimitingInterface: q, limiter: limiter, clock: clk, scheduled: map[Key]schedule{}, inflight: map[Key]int64{}}
}

// offer adds a key a poll or an event found at generation, unless it is scheduled for later at that generation or
// a newer one (or at an unknown one, after a failed fetch); it reports whether it was added. A new generation is
// always added at once: a spec change must not wait for a re-check or a backoff. An older generation (an event
// that arrives after the change it announced was seen) adds nothing.
func (q *workQueue) offer(key Key, generation int64) bool {
	q.mu.Lock()
	s, ok := q.scheduled[key]
	if ok && q.clock.Now().Before(s.at) && (s.generation == 0 || generation <= s.generation) {
		q.mu.Unlock()
		return false
	}
	// A worker already on this generation (or a newer one) will report it; adding the key again would reconcile
	// it twice.
	if g, busy := q.inflight[key]; busy && (g == 0 || generation <= g) {
		q.mu.Unlock()
		return false
	}
	delete(q.scheduled, key)
	q.mu.Unlock()
	q.Add(key)
	return true
}

// wake adds key at once, whatever it was scheduled for: something it depends on changed. A worker already on the
// key gets it again after it is done, so the change is never missed.
func (q *workQueue) wake(key Key) {
	q.mu.Lock()
	delete(q.scheduled, key)
	q.mu.Unlock()
	q.Add(key)
}

// schedule adds key after d and remembers when, and at which generation it was processed (0: unknown).
func (q *workQueue) schedule(key Key, d time.Duration, generation int64) {
	q.mu.Lock()
	q.scheduled[key] = schedule{at: q.clock.Now().Add(d), generation: generation}
	q.mu.Unlock()
	q.AddAfter(key, d)
}

// retry adds key after its next backoff delay.
func (q *workQueue) retry(key Key, generation int64) {
	q.schedule(key, q.backoff(key), generation)
}

// backoff returns key's next backoff delay through the rate limiter (counting one more failure).
func (q *workQueue) backoff(key Key) time.Duration {
	// AddRateLimited would not let us record the time; When is what it calls.
	return q.limiter.When(key)
}

// started marks key as being processed, its generation not yet known.
func (q *workQueue) started(key Key) {
	q.mu.Lock()
	q.inflight[key] = 0
	q.mu.Unlock()
}

// fetched records the generation the worker on key fetched.
func (q *workQueue) fetched(key Key, generation int64) {
	q.mu.Lock()
	if _, ok := q.inflight[key]; ok {
		q.inflight[key] = generation
	}
	q.mu.Unlock()
}

// finished marks key as no longer being processed.
func (q *workQueue) finished(key Key) {
	q.mu.Lock()
	delete(q.inflight, key)
	q.mu.Unlock()
}

// settle forgets key's failures and its schedule: it reconciled successfully and needs nothing until polled
// again.
func (q *workQueue) settle(key Key) {
	q.mu.Lock()
	delete(q.scheduled, key)
	q.mu.Unlock()
	q.Forget(key)
}
