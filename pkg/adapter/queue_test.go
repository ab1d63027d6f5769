package adapter

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// fixedRand returns a rand func that always yields v, so that the jitter is known.
func fixedRand(v float64) func() float64 { return func() float64 { return v } }

func TestJitteredBackoffWhen(t *testing.T) {
	const base, maxDelay = time.Second, 5 * time.Minute
	tests := []struct {
		name string
		rand float64
		// factor is the jitter the rand value must give: 1 + 0.1·(2·rand − 1).
		factor float64
	}{
		{name: "lowest jitter", rand: 0, factor: 0.9},
		{name: "no jitter", rand: 0.5, factor: 1},
		{name: "highest jitter", rand: math.Nextafter(1, 0), factor: 1.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newJitteredBackoff(base, maxDelay, fixedRand(tt.rand))
			key := Key{ID: "a"}
			for n := range 14 {
				got := b.When(key)
				exp := min(base*time.Duration(1<<n), maxDelay)
				want := min(time.Duration(float64(exp)*tt.factor), maxDelay)
				require.InDelta(t, float64(want), float64(got), float64(time.Microsecond), "failure %d", n)
				require.LessOrEqual(t, got, maxDelay, "failure %d", n)
				require.GreaterOrEqual(t, float64(got), 0.9*float64(exp)-float64(time.Microsecond), "failure %d", n)
				require.LessOrEqual(t, float64(got), 1.1*float64(exp)+float64(time.Microsecond), "failure %d", n)
				require.Equal(t, n+1, b.NumRequeues(key))
			}

			other := Key{ID: "b"}
			require.Zero(t, b.NumRequeues(other), "failures are counted per key")

			b.Forget(key)
			require.Zero(t, b.NumRequeues(key))
			require.InDelta(t, float64(base)*tt.factor, float64(b.When(key)), float64(time.Microsecond),
				"after Forget the next failure starts again at base")
			require.Equal(t, 1, b.NumRequeues(key))
		})
	}
}

func TestJitteredBackoffHugeFailureCount(t *testing.T) {
	const base, maxDelay = time.Second, 5 * time.Minute
	// 2^n overflows a Duration from n = 34 (with base 1s) and a float64 from n = 1024; none of them may escape max
	// or turn negative.
	for _, n := range []int{33, 34, 61, 62, 63, 1023, 1024, 1 << 40, math.MaxInt - 1} {
		for _, r := range []float64{0, 0.5, math.Nextafter(1, 0)} {
			b := newJitteredBackoff(base, maxDelay, fixedRand(r))
			key := Key{ID: "a"}
			b.failures[key] = n
			got := b.When(key)
			require.LessOrEqual(t, got, maxDelay, "n=%d rand=%v", n, r)
			require.GreaterOrEqual(t, got, time.Duration(0.9*float64(maxDelay))-time.Microsecond, "n=%d rand=%v", n, r)
		}
	}
}

func TestJitteredBackoffDefaultRand(t *testing.T) {
	// Without an injected rand the spread must still stay within ±10 % of base.
	b := newJitteredBackoff(time.Second, time.Minute, nil)
	key := Key{ID: "a"}
	for range 200 {
		b.Forget(key)
		got := b.When(key)
		require.GreaterOrEqual(t, got, 900*time.Millisecond)
		require.LessOrEqual(t, got, 1100*time.Millisecond)
	}
}

// newTestQueue returns a work queue on a fake clock whose backoff has no jitter (base 1s, max 5m), and the
// number of waiters the clock has while nothing is delayed (the delaying queue's heartbeat ticker).
func newTestQueue(tb testing.TB) (*workQueue, *testingclock.FakeClock, int) {
	tb.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	q := newWorkQueue(newJitteredBackoff(time.Second, 5*time.Minute, fixedRand(0.5)), clk)
	tb.Cleanup(q.ShutDown)
	idle := clk.Waiters()
	return q, clk, idle
}

// waitForTimer waits until the queue's delaying goroutine has taken up the delayed keys and armed its timer
// for the earliest of them: only then does stepping the clock fire it.
func waitForTimer(tb testing.TB, clk *testingclock.FakeClock, idle int) {
	tb.Helper()
	require.Eventually(tb, func() bool { return clk.Waiters() == idle+1 }, 10*time.Second, time.Millisecond,
		"the delaying queue never armed a timer")
}

// waitForLen waits for the queue's delaying goroutine to move ready keys into the queue.
func waitForLen(tb testing.TB, q *workQueue, n int) {
	tb.Helper()
	require.Eventually(tb, func() bool { return q.Len() == n }, 10*time.Second, time.Millisecond,
		"queue length stayed %d, want %d", q.Len(), n)
}

func scheduledAt(q *workQueue, key Key) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, ok := q.scheduled[key]
	return s.at, ok
}

func TestWorkQueue(t *testing.T) {
	a, b := Key{ID: "a"}, Key{ID: "b", ParentID: "p"}

	t.Run("duplicates coalesce", func(t *testing.T) {
		q, _, _ := newTestQueue(t)
		q.Add(a)
		q.Add(a)
		require.True(t, q.offer(a, 1))
		require.Equal(t, 1, q.Len())
		q.Add(b)
		require.Equal(t, 2, q.Len())
	})

	t.Run("a key being processed is not handed out again until Done", func(t *testing.T) {
		q, _, _ := newTestQueue(t)
		q.Add(a)
		got, shutdown := q.Get()
		require.False(t, shutdown)
		require.Equal(t, a, got)

		// Added again while a worker holds it: the queue keeps it aside, so a second worker cannot get it ...
		q.Add(a)
		require.True(t, q.offer(a, 1))
		require.Zero(t, q.Len())
		// ... but does get other keys.
		q.Add(b)
		require.Equal(t, 1, q.Len())
		got, _ = q.Get()
		require.Equal(t, b, got)
		q.Done(b)

		q.Done(a)
		require.Equal(t, 1, q.Len(), "the key added during processing must come back once, after Done")
		got, _ = q.Get()
		require.Equal(t, a, got)
		q.Done(a)
		require.Zero(t, q.Len())
	})

	t.Run("schedule delays a key until the clock passes its time", func(t *testing.T) {
		q, clk, idle := newTestQueue(t)
		probe := Key{ID: "probe"}
		q.schedule(a, 30*time.Second, 1)
		q.schedule(probe, 29*time.Second, 1)
		waitForTimer(t, clk, idle)
		require.Zero(t, q.Len())

		// Once the probe is out, the delaying goroutine has looked at the clock at 29s and left a in waiting.
		clk.Step(29 * time.Second)
		waitForLen(t, q, 1)
		got, _ := q.Get()
		require.Equal(t, probe, got)
		require.Zero(t, q.Len(), "a is due at 30s, not 29s")

		// This step lands on the delaying queue's 10s heartbeat, so its goroutine reads the clock again even if
		// it was re-arming its timer from the old time while we stepped.
		clk.Step(time.Second)
		waitForLen(t, q, 1)
		got, _ = q.Get()
		require.Equal(t, a, got)
	})

	t.Run("offer skips a key a worker is on", func(t *testing.T) {
		q, _, _ := newTestQueue(t)
		q.started(a)
		require.False(t, q.offer(a, 1), "generation not fetched yet: the worker will report what it finds")
		q.fetched(a, 1)
		require.False(t, q.offer(a, 1), "the worker reports generation 1")
		require.True(t, q.offer(a, 2), "a newer generation than the worker's is queued for after it")
		q.fetched(a, 3)
		require.False(t, q.offer(a, 2), "an event about an older generation than the worker's: the worker covers it")
		q.finished(a)
		require.True(t, q.offer(a, 1))
	})

	t.Run("offer takes a new generation at once", func(t *testing.T) {
		q, _, _ := newTestQueue(t)
		q.schedule(a, time.Minute, 1)
		require.False(t, q.offer(a, 1), "the same generation waits for its re-check")
		require.True(t, q.offer(a, 2), "a spec change must not wait for the re-check")
		require.Equal(t, 1, q.Len())
		q.schedule(a, time.Minute, 3)
		require.False(t, q.offer(a, 2), "a late event about an older generation waits for the re-check too")

		q.schedule(b, time.Minute, 0)
		require.False(t, q.offer(b, 7), "after a failed fetch the generation is unknown: the backoff holds")
	})

	t.Run("offer refuses a key scheduled for later", func(t *testing.T) {
		q, clk, idle := newTestQueue(t)
		start := clk.Now()
		require.True(t, q.offer(b, 1), "an unscheduled key is added")
		require.Equal(t, 1, q.Len())

		q.schedule(a, 30*time.Second, 1)
		at, ok := scheduledAt(q, a)
		require.True(t, ok)
		require.Equal(t, start.Add(30*time.Second), at)
		require.False(t, q.offer(a, 1), "a poll must not pull forward a re-check the reconciler asked for")
		require.Equal(t, 1, q.Len())

		waitForTimer(t, clk, idle)
		clk.Step(30*time.Second - time.Nanosecond)
		require.False(t, q.offer(a, 1))

		clk.Step(time.Nanosecond)
		require.True(t, q.offer(a, 1))
		_, ok = scheduledAt(q, a)
		require.False(t, ok, "a schedule that has passed is forgotten")
		require.True(t, q.offer(a, 1))
		// Whether or not the delayed add has fired by now, a is queued once beside b.
		require.Equal(t, 2, q.Len())
	})

	t.Run("retry delays by the backoff", func(t *testing.T) {
		q, clk, idle := newTestQueue(t)
		start := clk.Now()
		q.retry(a, 1)
		at, ok := scheduledAt(q, a)
		require.True(t, ok)
		require.Equal(t, start.Add(time.Second), at, "first failure waits base")
		require.Equal(t, 1, q.NumRequeues(a))
		require.False(t, q.offer(a, 1))

		waitForTimer(t, clk, idle)
		clk.Step(time.Second - time.Millisecond)
		// Nothing fired, so the delaying goroutine is still waiting for its timer: a is really not there.
		require.Zero(t, q.Len())
		clk.Step(time.Millisecond)
		waitForLen(t, q, 1)
		got, _ := q.Get()
		require.Equal(t, a, got)

		q.retry(a, 1)
		q.Done(a)
		at, _ = scheduledAt(q, a)
		require.Equal(t, start.Add(time.Second+2*time.Second), at, "second failure waits 2·base")
		require.Equal(t, 2, q.NumRequeues(a))
	})

	t.Run("settle forgets failures and the schedule", func(t *testing.T) {
		q, clk, _ := newTestQueue(t)
		start := clk.Now()
		for range 3 {
			q.retry(a, 1)
		}
		require.Equal(t, 3, q.NumRequeues(a))
		require.False(t, q.offer(a, 1))

		q.settle(a)
		require.Zero(t, q.NumRequeues(a))
		_, ok := scheduledAt(q, a)
		require.False(t, ok)
		require.True(t, q.offer(a, 1), "a settled key is offered at once")
		require.Equal(t, 1, q.Len())

		q.retry(a, 1)
		at, _ := scheduledAt(q, a)
		require.Equal(t, start.Add(time.Second), at, "the next failure starts again at base")
	})
}
