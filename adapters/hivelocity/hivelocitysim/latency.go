package hivelocitysim

import (
	"context"
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"
)

// latency is a slow answer's round trip: the wait before the request is applied and the wait before its answer is
// written.
type latency struct {
	before, after time.Duration
}

// latencyFor draws the round trip of a request naming device id (0: none) from the slow_answers fault in effect
// at now, if any. Callers hold s.mu.
func (s *Simulator) latencyFor(id int32, now time.Time) latency {
	f := s.faultAt(FaultSlowAnswers, id, now)
	if f == nil {
		return latency{}
	}
	total := f.randomDelay()
	before := rand.N(total + 1) //nolint:gosec // simulated latency, not a secret
	return latency{before: before, after: total - before}
}

// sleep waits d on the simulator's clock if it can sleep, else in real time. It returns false if ctx ended
// first. Callers do not hold s.mu.
func (s *Simulator) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	var fired <-chan time.Time
	var stop func() bool
	if c, ok := s.clock.(interface {
		NewTimer(time.Duration) clock.Timer
	}); ok {
		t := c.NewTimer(d)
		fired, stop = t.C(), t.Stop
	} else {
		t := time.NewTimer(d)
		fired, stop = t.C, t.Stop
	}
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		stop()
		return false
	}
}
