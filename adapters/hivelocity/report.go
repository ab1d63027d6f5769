package hivelocity

import (
	"context"
	"errors"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// lastReport is what the provisioner reads back from its previous report about a pool: when each device entered
// its state (so that a restarted provisioner neither looks again at devices it saw ready nor restarts the
// clocks of running reloads), and the remediations not yet behind the pool.
type lastReport struct {
	devices    map[int32]deviceRow
	remediated []remediation
}

func lastReportOf(r *adapter.Report) lastReport {
	out := lastReport{devices: map[int32]deviceRow{}}
	if r == nil {
		return out
	}
	list, _ := r.Data[DataDevices].([]any)
	for _, it := range list {
		m, _ := it.(map[string]any)
		id, ok := number(m["device_id"])
		if !ok {
			continue
		}
		slot, _ := number(m["slot"])
		state, _ := m["state"].(string)
		since, _ := m["since"].(string)
		out.devices[int32(id)] = deviceRow{ID: int32(id), Slot: int(slot), State: State(state), Since: timeOf(since)} //nolint:gosec // device ids are int32 on the wire
	}
	rem, _ := r.Data[DataRemediated].([]any)
	for _, it := range rem {
		m, _ := it.(map[string]any)
		id, ok := number(m["device_id"])
		if !ok {
			continue
		}
		slot, _ := number(m["slot"])
		why, _ := m["why"].(string)
		at, _ := m["time"].(string)
		out.remediated = append(out.remediated, remediation{DeviceID: int32(id), Slot: int(slot), Why: why, At: timeOf(at)}) //nolint:gosec // as above
	}
	return out
}

// timeOf reads an RFC 3339 time; anything else is the zero time, which every use of it treats as unknown.
func timeOf(v string) time.Time {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// number reads a JSON number as the API stores it (float64), or an int as a report built in process holds it.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	default:
		return 0, false
	}
}

// outcome reports the pass: the summary, when to come back, and the error class for the runtime.
func (p *pass) outcome(ctx context.Context) (adapter.Outcome, error) {
	finalized := p.finalizing && p.finalized(ctx)
	s := p.summarize()
	s.Finalized = finalized
	out := outcomeOf(s)
	out.RequeueAfter = p.requeue(s)
	err := p.errorOf(s)
	if err != nil {
		if d := hvclient.RetryAfter(err); d > 0 {
			out.RequeueAfter = d
		}
	}
	return out, err
}

func (p *pass) summarize() summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := summary{Replicas: p.pool.Replicas, Finalizing: p.finalizing, Missing: p.missing, Spares: len(p.spares),
		Skips: p.skips, Blocked: p.blocked, APIErr: p.apiErr, Spec: p.pool.Spec,
		Held: p.held, InRemediation: p.inRemediation, MaxUnhealthy: p.pool.MaxUnhealthy, Refusals: p.refusalsOf()}
	if p.snap == nil { // nothing could be seen: say what the last report said rather than nothing
		for _, d := range p.last.devices {
			s.Devices = append(s.Devices, d)
		}
	}
	for _, m := range p.members {
		s.Devices = append(s.Devices, deviceRow{ID: m.dev.ID, Slot: m.own.Slot, State: m.state, Power: m.dev.Power,
			PrimaryIP: m.dev.PrimaryIP, Since: m.since})
	}
	s.Remediated = carry(p.last.remediated, p.remediated, s.fullyReady())
	return s
}

// finalized reports whether a deleted pool owns no device: a device list taken once every write of a reconcile
// begun before the deletion shows (finalizeAfter) shows none.
func (p *pass) finalized(ctx context.Context) bool {
	if p.snap == nil || len(p.members) > 0 || p.obj.DeletedTime == nil {
		return false
	}
	safe := p.obj.DeletedTime.Add(p.r.s.finalizeAfter())
	if now := p.now(); now.Before(safe) {
		p.wakeAt(safe)
		return false
	}
	snap := p.snap
	if !snap.taken.After(safe) {
		var err error
		if snap, err = p.r.devices.fresh(ctx); err != nil {
			p.failed(err)
			return false
		}
	}
	for i := range snap.devices {
		if own, owned := ownershipOf(p.r.notes.tagsOf(snap.devices[i], snap.taken)); owned && own.NodePool == p.pool.ID {
			p.changing()
			return false
		}
	}
	return true
}

// requeue is how soon the pool should be reconciled again: at once after a rate-limit pause ends, within
// PollInterval while its devices change, every other device list while reloads run, when a device's status is
// due, and otherwise at the runtime's re-check.
func (p *pass) requeue(s summary) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.Finalized {
		return 0
	}
	poll := p.r.s.PollInterval
	var d time.Duration
	switch {
	case p.busy || s.Missing > 0 && s.Spares > 0:
		d = poll
	case p.inFlight:
		// A reload takes minutes and the list shows its end (the new OS): look at every other list, not at
		// every poll, so that a provisioning pool costs few lists.
		d = max(poll, 2*p.r.s.ListTTL)
	case s.Missing > 0 || s.Blocked != nil:
		d = 4 * poll // nothing to claim yet: an operator may tag devices, or add the SSH key
	}
	if !p.wake.IsZero() {
		until := max(p.wake.Sub(p.r.clock.Now()), poll/10)
		if d == 0 || until < d {
			d = until
		}
	}
	return d
}

// errorOf is the error the runtime reports in Health: a failure talking to Hivelocity, a missing prerequisite,
// or calls for a device that Hivelocity refused RefusalLimit times in a row. A single refusal, or a device that
// vanished, is not one: the device is left alone for its backoff and the next pass sees why.
func (p *pass) errorOf(s summary) error {
	err := s.APIErr
	switch {
	case err != nil && !errors.Is(err, hvclient.ErrRejected) && !errors.Is(err, hvclient.ErrNotFound) && !errors.Is(err, hvclient.ErrLate):
		return transient(err)
	case s.Blocked != nil:
		return transient(s.Blocked)
	}
	if err := escalated(s.Refusals, p.r.s.RefusalLimit); err != nil {
		return adapter.Transient(ReasonCallRefused, err)
	}
	return nil
}
