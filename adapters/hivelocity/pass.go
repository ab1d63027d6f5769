package hivelocity

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// pass is one reconcile of one pool: what it saw, what it did, and what went wrong.
type pass struct {
	r          *Reconciler
	obj        *adapter.Object
	pool       Pool
	finalizing bool
	began      time.Time
	last       lastReport

	snap    *snapshot
	members []*member
	spares  []hvclient.Device // devices eligible for the pool, unowned
	skips   map[SkipReason]int
	missing int // slots still without a device after this pass's claims

	mu         sync.Mutex // guards the fields below, written by concurrent claims and status GETs
	apiErr     error      // the first failure talking to Hivelocity
	blocked    error      // a prerequisite the pool lacks (SSH key, OS)
	remediated []remediation
	// held counts the failed devices remediation holds back (MaxUnhealthy); inRemediation those being taken out.
	held, inRemediation int
	// claimRefused are the spares whose claim Hivelocity refused, this pass or before (still backing off).
	claimRefused []int32
	wake         time.Time // the earliest time something is due; zero: nothing is
	busy         bool      // devices are changing: come back after PollInterval at the latest
	inFlight     bool      // reloads are running: come back when the list may show one ending
}

func (p *pass) now() time.Time { return p.r.clock.Now() }

// run is the whole reconcile: look, repair, release, carry on, fill up, report. No call goes out after the pass
// deadline (the rest waits for the next pass), so that a deleted pool can tell when it owns nothing for good.
func (p *pass) run(ctx context.Context) (adapter.Outcome, error) {
	ctx = hvclient.SendBy(ctx, p.began.Add(p.r.s.passDeadline()))
	if err := p.observe(ctx); err != nil {
		p.failed(err)
		return p.outcome(ctx)
	}
	p.remediate(ctx)
	p.noteStopping()
	pl := decide(limitsOf(p.pool, len(p.spares) > 0), p.members)
	p.release(ctx, pl.release)
	p.progress(ctx, pl)
	if !p.finalizing {
		p.fill(ctx, pl.slots)
	}
	return p.outcome(ctx)
}

// failed records an error of a call to Hivelocity or of a prerequisite; the first of each kind is reported.
func (p *pass) failed(err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case errors.Is(err, errDeviceChanged) || errors.Is(err, hvclient.ErrLate):
		// Not a failure: the pass acted on what is no longer so, and the next one sees what is.
		p.busy = true
	case errors.Is(err, errSSHKeyNotFound) || errors.Is(err, errOSNotOffered):
		if p.blocked == nil {
			p.blocked = err
		}
	case p.apiErr == nil:
		p.apiErr = err
	}
}

// wakeAt asks for the next reconcile no later than t.
func (p *pass) wakeAt(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wake.IsZero() || t.Before(p.wake) {
		p.wake = t
	}
}

// changing asks for the next pass within PollInterval: a shutdown to watch, a claim to settle, a call refused.
func (p *pass) changing() {
	p.mu.Lock()
	p.busy = true
	p.mu.Unlock()
}

// waiting asks for a next pass while reloads run: one a new device list may show ending. Their deadlines come
// through wakeAt.
func (p *pass) waiting() {
	p.mu.Lock()
	p.inFlight = true
	p.mu.Unlock()
}

// paused reports whether calls to Hivelocity cannot go out now (a rate-limit pause): the pass stops acting.
func (p *pass) paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Is(p.apiErr, hvclient.ErrRateLimited) || errors.Is(p.apiErr, hvclient.ErrUnauthorized)
}

// observe reads the shared device list, finds the pool's devices and the spares, looks fresh at the devices whose
// reload is due a look, and classifies every device.
func (p *pass) observe(ctx context.Context) error {
	snap, err := p.r.devices.get(ctx)
	if err != nil {
		return err
	}
	p.snap = snap
	for i := range snap.devices {
		d := snap.devices[i] // a copy: the snapshot is shared
		d.Tags = p.r.notes.tagsOf(d, snap.taken)
		own, owned := ownershipOf(d.Tags)
		switch {
		case owned && own.NodePool == p.pool.ID:
			p.members = append(p.members, &member{dev: d, own: own})
		case p.finalizing:
		default:
			if why := eligibility(d, p.pool.Req); why != "" {
				p.skips[why]++
			} else {
				p.spares = append(p.spares, d)
			}
		}
	}
	p.refresh(ctx)
	for _, m := range p.members {
		p.classify(m)
	}
	return nil
}

// refresh GETs the status of every device whose reload is due a look (see statusDue), in parallel.
func (p *pass) refresh(ctx context.Context) {
	now := p.now()
	var due []*member
	for _, m := range p.members {
		p.learn(m, now)
		at, watch := statusDue(p.r.notes.get(m.dev.ID), m.own, m.dev, p.pool.OffTimeout, p.pool.OnTimeout,
			p.r.s.StatusInterval, p.r.s.PollInterval)
		switch {
		case !watch:
		case !at.After(now):
			due = append(due, m)
		default:
			p.wakeAt(at)
		}
	}
	gone := map[*member]bool{}
	var mu sync.Mutex
	each(ctx, p.r.s.ClaimConcurrency, due, func(ctx context.Context, m *member) {
		sent := p.now()
		st, err := p.r.api.Status(ctx, m.dev.ID)
		if err != nil {
			if errors.Is(err, hvclient.ErrNotFound) {
				mu.Lock()
				gone[m] = true
				mu.Unlock()
				return
			}
			p.failed(err)
			return
		}
		at := p.now()
		p.r.notes.read(m.dev.ID, st.Tags, at)
		own, _ := ownershipOf(st.Tags)
		if own.NodePool != p.pool.ID { // released, or taken by hand, since the list was taken
			mu.Lock()
			gone[m] = true
			mu.Unlock()
			return
		}
		gap := stableGap(p.r.s.PollInterval)
		var over bool
		var next time.Time
		p.r.notes.update(m.dev.ID, at, func(n *notes) {
			reloadNotes(n, own.ReloadAt)
			n.statuses++
			n.lastStatus = at
			over, n.quietSince = reloadOver(st, *n, p.listOS(m, *n), sent, at, gap)
			next = quietDue(*n, gap)
			n.ended = over
			if st.Reloading && st.Power == hvclient.PowerOn && n.installingSince.IsZero() {
				n.installingSince = at
			}
		})
		// The status as believed: a read that shows the reload not running does not end it before the
		// stable-end rule does (reloadOver).
		believed, quiet := st, !over && !st.Reloading
		if quiet {
			believed.Reloading = true
			p.wakeAt(next)
		}
		m.status, m.statusSent, m.quiet, m.own, m.dev.Tags, m.dev.Power = &believed, sent, quiet, own, st.Tags, st.Power
	})
	p.members = dropMembers(p.members, gone)
}

// listOS returns the OS the pass's device list names for m if that list was asked for after m's reload was
// sent (so that it cannot show the OS of before), else "".
func (p *pass) listOS(m *member, n notes) string {
	sent := n.startedAt
	if sent.IsZero() {
		sent = m.own.ReloadAt.Add(time.Second) // the tag is in whole seconds, truncated
	}
	if p.snap == nil || !p.snap.taken.After(sent) {
		return ""
	}
	return m.dev.OSName
}

// learn brings this replica's notes of m's reload up to date with the list and the last report: when its
// installer was first seen running, and whether the last report already saw the reload end.
func (p *pass) learn(m *member, now time.Time) {
	if m.own.ReloadAt.IsZero() {
		return
	}
	prev, known := p.last.devices[m.dev.ID]
	p.r.notes.update(m.dev.ID, now, func(n *notes) {
		fresh := !n.reloadAt.Equal(m.own.ReloadAt)
		reloadNotes(n, m.own.ReloadAt)
		if fresh && known && !prev.Since.Before(m.own.ReloadAt) {
			switch prev.State {
			case StateReady, StateOutdated, StateOff:
				n.ended = true
			case StateInstalling:
				n.installingSince = prev.Since
			default: // the report saw the reload running, or not yet: nothing to learn
			}
		}
		// A list taken before the reload began may show the device still on: only a later one says the
		// installer runs.
		started := n.startedAt
		if started.IsZero() {
			started = m.own.ReloadAt
		}
		if m.dev.Power == hvclient.PowerOn && !n.ended && n.installingSince.IsZero() && p.snap.taken.After(started) {
			n.installingSince = now
		}
	})
}

// classify decides m's state from its tags, the notes and a fresh status, and when it entered that state.
func (p *pass) classify(m *member) {
	n := p.r.notes.get(m.dev.ID)
	done := n.ended && n.reloadAt.Equal(m.own.ReloadAt) && !m.own.ReloadAt.IsZero()
	m.state, m.ended, m.failed = classify(m.own, p.pool.Spec, observation{power: m.dev.Power, status: m.status, done: done})
	m.current = m.own.Spec == p.pool.Spec
	mine := m.own.Claim.Nonce != "" && n.wonClaim == m.own.Claim.Nonce
	age := p.snap.taken.Sub(m.own.Claim.At)
	m.settled = m.state != StateClaimed || mine || age >= 2*p.r.s.ClaimSettle
	m.adopted = m.state == StateClaimed && (mine || age >= p.r.s.AdoptAfter())
	switch {
	case !m.settled:
		p.wakeAt(m.own.Claim.At.Add(2 * p.r.s.ClaimSettle))
	case m.state == StateClaimed && !m.adopted:
		p.wakeAt(m.own.Claim.At.Add(p.r.s.AdoptAfter()))
	}
	m.since = sinceOf(m, p.last.devices[m.dev.ID], n, p.now())
}

// sinceOf is when m entered its state: as the last report said if it was in that state then, else when the
// tags or notes say it did, else now.
func sinceOf(m *member, prev deviceRow, n notes, now time.Time) time.Time {
	if prev.State == m.state && !prev.Since.IsZero() {
		return prev.Since
	}
	var t time.Time
	switch m.state {
	case StateClaimed:
		t = m.own.Claim.At
	case StateReloading:
		t = m.own.ReloadAt
	case StateInstalling:
		t = n.installingSince
	case StateReleasing:
		t = m.own.ReleaseAt
	default:
	}
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

func dropMembers(ms []*member, gone map[*member]bool) []*member {
	if len(gone) == 0 {
		return ms
	}
	out := make([]*member, 0, len(ms))
	for _, m := range ms {
		if !gone[m] {
			out = append(out, m)
		}
	}
	return out
}
