package adapter

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// apiRequestTimeout bounds one request to the API (the generated client's http.Client.Timeout).
const apiRequestTimeout = 30 * time.Second

// health is what the ops endpoints judge the replica by. The two questions are kept apart on purpose:
//
//   - liveness (/healthz) asks whether the process's own loops still turn: no worker stuck in one reconcile
//     beyond every bound the runtime puts on it, and a queue with ready work that workers still take from. Nothing
//     outside the process decides it, so an outage of the API or of the external system never restarts the
//     adapter (its in-memory state, backoffs and claims survive the outage);
//   - readiness (/readyz) asks whether the replica can do its work now: pending work listed, not draining, the API
//     heard from recently, the external system answering, and every check the adapter added (its caches fresh).
type health struct {
	// busySince holds, per worker, when it took the key it works on (unix nanoseconds; 0 while idle).
	busySince []atomic.Int64
	// lastTaken is when a worker last took a key from the queue (unix nanoseconds).
	lastTaken atomic.Int64

	mu      sync.Mutex
	systems map[string]*reachability
	checks  []readinessCheck
}

// reachability is what the calls to one external system last said. failingSince is the first failure after the
// last success: one failed call is no outage, calls failing for a whole window are.
type reachability struct {
	lastSuccess, lastFailure, failingSince time.Time
	lastError                              string
}

type readinessCheck struct {
	name  string
	check func() error
}

func newHealth(workers int) *health {
	return &health{busySince: make([]atomic.Int64, workers), systems: map[string]*reachability{}}
}

// took notes that worker w took a key at now; done that it finished it.
func (h *health) took(w int, now time.Time) {
	h.busySince[w].Store(now.UnixNano())
	h.lastTaken.Store(now.UnixNano())
}

func (h *health) done(w int) { h.busySince[w].Store(0) }

// called records one call to an external system: reached is false when it could not be reached or refused the
// adapter's credentials.
func (h *health) called(system string, now time.Time, reached bool, detail string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.systems[system]
	if s == nil {
		s = &reachability{}
		h.systems[system] = s
	}
	if reached {
		s.lastSuccess = now
		return
	}
	if !s.lastFailure.After(s.lastSuccess) {
		s.failingSince = now
	}
	s.lastFailure, s.lastError = now, detail
}

// unreachable names the external systems whose calls have failed, with no success between, for longer than
// window.
func (h *health) unreachable(now time.Time, window time.Duration) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, s := range h.systems {
		if s.lastFailure.After(s.lastSuccess) && now.Sub(s.failingSince) > window {
			out = append(out, fmt.Sprintf("%s unreachable: every call failed for %s (last error: %s)", name, now.Sub(s.failingSince).Round(time.Second), s.lastError))
		}
	}
	slices.Sort(out)
	return out
}

// failedChecks runs the adapter's readiness checks and returns what they say is wrong.
func (h *health) failedChecks() []string {
	h.mu.Lock()
	checks := slices.Clone(h.checks)
	h.mu.Unlock()
	var out []string
	for _, c := range checks {
		if err := c.check(); err != nil {
			out = append(out, c.name+": "+err.Error())
		}
	}
	return out
}

// reachedSystem tells whether an answer (or its absence) from an external system shows it reachable with the
// adapter's credentials: a gateway that cannot reach it (502, 503, 504) does not, nor does an answer refusing the
// credentials (401, 403), which the adapter cannot work past either. Any other answer, even an error about one
// object, does.
func reachedSystem(resp *http.Response, err error) (bool, string) {
	switch {
	case err != nil:
		return false, err.Error()
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden,
		resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable,
		resp.StatusCode == http.StatusGatewayTimeout:
		return false, "answered " + resp.Status
	}
	return true, ""
}

// AddReadinessCheck adds a check to /readyz: while check returns an error, the replica is not ready and /readyz
// says name and the error. An adapter adds one for what only it knows, e.g. that a cache of its external system
// has stopped updating. check is called on every probe: it must be quick and must not block.
func (r *Runner) AddReadinessCheck(name string, check func() error) {
	r.health.mu.Lock()
	defer r.health.mu.Unlock()
	r.health.checks = append(r.health.checks, readinessCheck{name: name, check: check})
}

// wedgedAfter is how long a worker may take one key before liveness fails: the fetch, the reconcile and the
// status post are each bounded (apiRequestTimeout, ReconcileTimeout, apiRequestTimeout), so a worker still busy
// well past their sum will not come back.
func (r *Runner) wedgedAfter() time.Duration {
	return r.cfg.ReconcileTimeout + 3*apiRequestTimeout + time.Minute
}

// liveness returns why the process's loops are not alive, or nil.
func (r *Runner) liveness() error {
	now, limit := r.clock.Now(), r.wedgedAfter()
	var stuck []string
	for w := range r.health.busySince {
		if since := r.health.busySince[w].Load(); since != 0 && now.Sub(time.Unix(0, since)) > limit {
			stuck = append(stuck, fmt.Sprintf("worker %d has been on one key for %s", w, now.Sub(time.Unix(0, since)).Round(time.Second)))
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("workers wedged (limit %s): %s", limit, strings.Join(stuck, "; "))
	}
	taken := r.health.lastTaken.Load()
	if taken == 0 {
		taken = r.started.UnixNano()
	}
	if ready := r.queue.Len(); ready > 0 && !r.stopping.Load() && now.Sub(time.Unix(0, taken)) > limit {
		return fmt.Errorf("the queue does not move: %d keys ready and none taken for %s", ready, now.Sub(time.Unix(0, taken)).Round(time.Second))
	}
	return nil
}

// readiness returns why the replica cannot do its work now, or nil.
func (r *Runner) readiness() error {
	switch {
	case r.stopping.Load():
		return errors.New("draining")
	case !r.listed.Load():
		return errors.New("pending work not listed yet")
	}
	var why []string
	now, window := r.clock.Now(), r.healthWindow()
	if last := r.lastContact.Load(); last == 0 || now.Sub(time.Unix(0, last)) > window {
		why = append(why, fmt.Sprintf("hyperfleet-api unreachable: no successful poll or event of the %s source within %s", r.cfg.Source, window))
	}
	why = append(why, r.health.unreachable(now, window)...)
	why = append(why, r.health.failedChecks()...)
	if len(why) > 0 {
		return errors.New(strings.Join(why, "; "))
	}
	return nil
}
