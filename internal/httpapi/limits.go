package httpapi

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// How long a client over a concurrency bound is told to wait: a stream lasts minutes, so there is no point in
// retrying one at once; a list lasts a moment.
const (
	watchRetryAfter = 10 * time.Second
	listRetryAfter  = time.Second
)

// concurrency counts what each identity (and everyone together) has open, and refuses more than the bounds; a
// bound of 0 is no bound. It is a count, not a queue: a caller over the bound is told to come back, so a burst
// cannot pile up waiting goroutines and database connections.
type concurrency struct {
	perIdentity, total int

	mu   sync.Mutex
	open map[string]int
	all  int
}

func newConcurrency(perIdentity, total int) *concurrency {
	return &concurrency{perIdentity: perIdentity, total: total, open: map[string]int{}}
}

// acquire takes one slot for identity and returns its release, or false when identity, or everyone, is at the
// bound (perIdentity says which).
func (c *concurrency) acquire(identity string) (release func(), ok bool, perIdentity bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.perIdentity > 0 && c.open[identity] >= c.perIdentity:
		return nil, false, true
	case c.total > 0 && c.all >= c.total:
		return nil, false, false
	}
	c.open[identity]++
	c.all++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.all--
			c.open[identity]--
			if c.open[identity] <= 0 {
				delete(c.open, identity) // the table holds only identities with something open
			}
		})
	}, true, false
}

// tooMany answers 429 with Retry-After for a request over a concurrency bound.
func (s *Handler) tooMany(w http.ResponseWriter, r *http.Request, what string, perIdentity bool, after time.Duration) {
	who := "this server has"
	if perIdentity {
		who = "this identity has"
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(after.Seconds())))
	writeError(w, r, s.log, resource.Errorf(resource.CodeTooManyConcurrent, "%s too many %s open; retry in %d s", who, what, int(after.Seconds())))
}

// lifetime returns how long one watch stream may last: longest less up to a tenth at random, so that the streams
// opened together (after a deploy, a failover) do not all end, and come back, together. Zero is no limit.
func lifetime(longest time.Duration) time.Duration {
	if longest <= 0 {
		return 0
	}
	return longest - time.Duration(rand.Int64N(int64(longest/10)+1)) //nolint:gosec // jitter, not a secret
}
