package hostedcluster

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Default pace of re-applies that no spec change asked for: a new applier version, a new pull secret or a changed
// default reaches the fleet one cluster a second after a burst of five, never all of it in one pass.
const (
	DefaultReapplyRate  = 1.0
	DefaultReapplyBurst = 5
)

// Pacer spaces out the re-applies of clusters whose spec did not change but whose built objects did. It is shared
// by every cluster of the process. Each cluster it holds back keeps the token it reserved, so a waiting cluster
// comes back once, at its turn, instead of contending for every new token: a fleet of n clusters costs n
// reservations, not n² retries.
type Pacer struct {
	limiter *rate.Limiter

	mu  sync.Mutex
	due map[string]time.Time // cluster id → when its reserved re-apply may go
}

// NewPacer returns a pacer admitting perSecond re-applies a second after a burst of burst.
func NewPacer(perSecond float64, burst int) (*Pacer, error) {
	if perSecond <= 0 || burst < 1 {
		return nil, errors.New("--reapply-rate must be positive and --reapply-burst at least 1")
	}
	return &Pacer{limiter: rate.NewLimiter(rate.Limit(perSecond), burst), due: map[string]time.Time{}}, nil
}

// Admit reports how long the cluster id must wait, at now, before its re-apply: zero when it may go now. A cluster
// told to wait holds its turn; asking again before the turn gives the rest of the wait, not a new turn.
func (p *Pacer) Admit(id string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if due, ok := p.due[id]; ok {
		if now.Before(due) {
			return due.Sub(now)
		}
		delete(p.due, id)
		return 0
	}
	wait := p.limiter.ReserveN(now, 1).DelayFrom(now) // burst ≥ 1, so the reservation is always granted
	if wait <= 0 {
		return 0
	}
	p.due[id] = now.Add(wait)
	return wait
}

// Forget drops the turn the cluster id holds, if any: it applied for another reason (its spec changed) or is gone.
// A nil pacer holds nothing.
func (p *Pacer) Forget(id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.due, id)
}
