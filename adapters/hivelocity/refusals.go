package hivelocity

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// Calls whose refusal (a 4xx: hvclient.ErrRejected) is retried with backoff and escalated, as the report names
// them.
const (
	callTagWrite = "tag write"
	callClaim    = "claim (tag write)"
	callShutdown = "shutdown"
	callBoot     = "boot"
	callReload   = "reload"
	callWipe     = "wipe (reload)"
)

// reloadCall names the reload that leaves a device in state: a wipe, or a provisioning reload.
func reloadCall(state State) string {
	if state == StateReleasing || state == StateRemediating {
		return callWipe
	}
	return callReload
}

// refusal is what a replica remembers of the calls Hivelocity refused for one device since the last one it
// accepted: which call, its message, how many times in a row, and when the device may be tried again.
type refusal struct {
	DeviceID int32
	Call     string
	Message  string
	Count    int
	Next     time.Time
}

// refusals is a replica's memory of refused calls, per device. It is lost on restart, which costs at most one
// more refusal per device before the backoff builds up again: the tags, not this, say what a device is.
type refusals struct {
	mu   sync.Mutex
	byID map[int32]refusal
}

func newRefusals() *refusals { return &refusals{byID: map[int32]refusal{}} }

// note records a refusal of call at now and returns the device's record: the next try waits base·2^(n−1), at
// most limit, after the n-th refusal in a row.
func (r *refusals) note(id int32, call string, err error, now time.Time, base, limit time.Duration) refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.byID[id]
	rec.DeviceID, rec.Call, rec.Message = id, call, messageOf(err)
	rec.Count++
	rec.Next = now.Add(backoff(rec.Count, base, limit))
	r.byID[id] = rec
	return rec
}

// backoff is the wait after the n-th refusal in a row: base doubling, at most limit.
func backoff(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// clear forgets the device's refusals: Hivelocity accepted a call for it.
func (r *refusals) clear(id int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byID, id)
}

// get returns the device's record, if any.
func (r *refusals) get(id int32) (refusal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byID[id]
	return rec, ok
}

// messageOf is Hivelocity's message for a refused call, with its status, or the error itself.
func messageOf(err error) string {
	var e *hvclient.Error
	if errors.As(err, &e) && e.Message != "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return err.Error()
}

// refused records that Hivelocity refused call for m and asks for a pass when the backoff ends.
func (p *pass) refused(m *member, call string, err error) {
	rec := p.r.refused.note(m.dev.ID, call, err, p.now(), p.r.s.RefusalBackoff, p.r.s.RefusalBackoffMax)
	p.r.log.Info("call refused: backing off", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)),
		slog.String("call", call), slog.Int("refusals", rec.Count), slog.Time("next", rec.Next), slog.Any("error", err))
	p.wakeAt(rec.Next)
}

// refusedOrFailed records a refusal of call for m, or any other error as the pass's failure.
func (p *pass) refusedOrFailed(m *member, call string, err error) {
	if errors.Is(err, hvclient.ErrRejected) {
		p.refused(m, call, err)
		return
	}
	p.failed(err)
}

// accepted forgets m's refusals: Hivelocity accepted a call for it.
func (p *pass) accepted(m *member) { p.r.refused.clear(m.dev.ID) }

// backingOff reports whether m's last call was refused and its backoff has not ended; the pass then leaves m
// alone and comes back when it ends.
func (p *pass) backingOff(m *member) bool {
	rec, ok := p.r.refused.get(m.dev.ID)
	if !ok || !p.now().Before(rec.Next) {
		return false
	}
	p.wakeAt(rec.Next)
	return true
}

// noteClaimRefused remembers a spare whose claim Hivelocity refused (this pass, or one whose backoff runs), so that
// the report counts its refusals too: a pool whose every claim is refused must say so.
func (p *pass) noteClaimRefused(id int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.claimRefused, id) {
		p.claimRefused = append(p.claimRefused, id)
	}
}

// refusalsOf returns the refusal records of the pool's devices and of the spares whose claim was refused, by device.
func (p *pass) refusalsOf() []refusal {
	var out []refusal
	for _, m := range p.members {
		if rec, ok := p.r.refused.get(m.dev.ID); ok {
			out = append(out, rec)
		}
	}
	for _, id := range p.claimRefused {
		if rec, ok := p.r.refused.get(id); ok && rec.Call == callClaim {
			out = append(out, rec)
		}
	}
	return out
}
