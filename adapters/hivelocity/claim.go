package hivelocity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// fill claims devices for the pool's empty slots and starts provisioning the ones it won. It claims nothing when
// the pool could not be provisioned anyway: no such SSH key, or no spare whose product offers its OS.
func (p *pass) fill(ctx context.Context, slots []int) {
	p.missing = len(slots)
	if len(slots) == 0 || p.paused() {
		return
	}
	if _, err := p.r.lookups.sshKeyID(ctx, p.pool.SSHKeyName); err != nil {
		p.failed(err)
		return
	}
	candidates := p.candidates(ctx)
	if len(candidates) == 0 && p.skips[SkipOSNotOffered] > 0 {
		p.failed(fmt.Errorf("%w: none of the %d otherwise eligible devices offers %q", errOSNotOffered, p.skips[SkipOSNotOffered], p.pool.OSName))
		return
	}
	targets := make([]claimTarget, 0, len(slots))
	for i, slot := range slots {
		if i == len(candidates) {
			break
		}
		targets = append(targets, claimTarget{slot: slot, dev: candidates[i]})
	}
	if len(targets) > 0 {
		p.changing()
	}
	for _, m := range p.claim(ctx, targets) {
		p.members = append(p.members, m)
		p.missing--
		p.provisionSpare(ctx, m)
	}
}

// candidates returns the spares whose product offers the pool's OS, in the pool's rendezvous order, and counts
// the others as skipped.
func (p *pass) candidates(ctx context.Context) []hvclient.Device {
	var out []hvclient.Device
	ordered := rendezvous(p.pool.ID, p.spares)
	now := p.now()
	for i := range ordered {
		// A spare whose claim Hivelocity refused waits out its backoff; its record stays in the report.
		if rec, ok := p.r.refused.get(ordered[i].ID); ok && now.Before(rec.Next) {
			p.noteClaimRefused(ordered[i].ID)
			continue
		}
		_, err := p.r.lookups.osName(ctx, ordered[i].ProductID, p.pool.OSName)
		switch {
		case err == nil:
			out = append(out, ordered[i])
		case errors.Is(err, errOSNotOffered):
			p.skips[SkipOSNotOffered]++
		default:
			p.failed(err)
			return out
		}
	}
	p.spares = out
	return out
}

// claimBudget is the arithmetic the claim protocol rests on. With S the settle delay, a claim
//
//   - sends its write no later than Gap after it sent its check read (a send deadline, hvclient.SendBy), so that
//     Hivelocity read the tags the check saw at most Gap before the write went out, however slow the answer;
//   - trusts its write only if its round trip (send → answer) took at most Write: Hivelocity applied it by then;
//   - reads the device back (verify) no earlier than S after its write's answer.
//
// Then two claims of one device never both verify while every tag write shows in reads within Delay() of being
// applied, where 2·Delay + Gap + Write = S. Proof: let A's write be applied first (at a), B's later (at b). If
// B's check read (at c ≥ its send time cs) saw A's claim, B stopped there. Otherwise c < a + δ, so cs < a + δ ≤
// wa + δ, with wa A's write's answer. B's write went out by cs + Gap and was applied by its answer, at most Write
// later: b ≤ cs + Gap + Write < wa + δ + Gap + Write, and it shows by b + δ < wa + 2δ + Gap + Write ≤ wa + S,
// before A's verify read: A sees B's nonce (or a later one) and gives up. Only B, whose write was the last, can
// see its own nonce. A claim whose write overran Write proves nothing of the kind, so it is not trusted: it is
// released once settled (see settle).
type claimBudget struct {
	Settle, Gap, Write time.Duration
}

// budgetOf returns the budget of a settle delay: a fifth of it each for the check-to-write gap and the write's
// round trip, which leaves 0.3·S for the tag-write delay (1.8 s of the default 6 s; 1.5 s of 5 s would leave
// answers only 1 s, less than the 1.2 s Hivelocity's can take).
func budgetOf(settle time.Duration) claimBudget {
	return claimBudget{Settle: settle, Gap: settle / 5, Write: settle / 5}
}

// Delay is the longest a tag write may take to show in reads for the protocol to be exactly once.
func (b claimBudget) Delay() time.Duration { return (b.Settle - b.Gap - b.Write) / 2 }

// Trusted reports whether a write whose round trip took rtt was applied early enough for the proof.
func (b claimBudget) Trusted(rtt time.Duration) bool { return rtt <= b.Write }

// claimGap is the most a write lets pass between its fresh read's send and its own send: a claim's check, the
// read every other tag write and reload starts from (writeFresh, reload).
func (s Settings) claimGap() time.Duration { return budgetOf(s.ClaimSettle).Gap }

// lease is how long after its claim's time the replica that won it may still send the device's reload: the
// claim settles (S and a few calls), the device shuts down (at most ShutdownTimeout before the reload is
// forced), and two polls. A reload is never sent later (hvclient.SendBy).
func (s Settings) lease() time.Duration {
	return 3*s.ClaimSettle + s.ShutdownTimeout + 2*s.PollInterval
}

// AdoptAfter is how old a claim must be before a replica that did not win it takes it over (with a new claim,
// see takeOver): by then its winner's reload, sent by the lease's end and answered within a settle (reloadTimeout),
// shows in reads (δ < S), so the takeover's check read sees it and stops.
func (s Settings) AdoptAfter() time.Duration { return s.lease() + 2*s.ClaimSettle }

// reloadTimeout bounds a reload call: a reload is applied by its answer, which comes within this or not at all.
func (s Settings) reloadTimeout() time.Duration { return s.ClaimSettle }

// sendBy returns ctx with its requests sent no later than t, nor than the pass's deadline: a later send
// deadline would replace the pass's.
func (p *pass) sendBy(ctx context.Context, t time.Time) context.Context {
	if end := p.began.Add(p.r.s.passDeadline()); end.Before(t) {
		t = end
	}
	return hvclient.SendBy(ctx, t)
}

// claimTarget is a device to claim for a slot: a spare, or with prior, a device of the pool to take over.
type claimTarget struct {
	slot int
	dev  hvclient.Device
	// prior is the ownership the pass saw on a device it takes over; nil for a spare.
	prior *Ownership
}

// attempt is a claim whose nonce was written.
type attempt struct {
	claimTarget
	own Ownership
	// answered is when the write's answer came; trusted is false when its round trip overran the budget.
	answered time.Time
	trusted  bool
}

// claim claims the targets, exactly once each even against replicas of other pools (and of this one) claiming
// the same devices at the same time, although the API replaces a device's whole tag list, a write may take a
// while to show in reads, and answers may be slow. For each target, in parallel:
//
//  1. GET /device/{id} afresh, noting when the request was sent; give up if the device is no longer eligible
//     (another pool's tags, a permanent error);
//  2. PUT its tags with the pool's ownership and a new claim (the check's send time and a nonce), sent no later
//     than Gap after the check was sent (the budget for both calls is reserved up front, and a write that could
//     not go out in time is not sent), timing the PUT's round trip;
//
// then, once ClaimSettle has passed since the last write's answer:
//
//  3. GET /device/{id} again (the endpoint of step 1) and go on only with those that still carry this claim's
//     nonce and whose write came back within the budget (an overrun claim that still stands is untagged);
//  4. list the devices afresh and yield any slot another device of the pool holds with an earlier claim (or a
//     reloaded device), untagging the device this pass claimed.
//
// The list of step 4 is asked for before the reads of step 3 (it only needs to go out ClaimSettle after the
// claims' times, as they do), so that a won claim's reload follows its verify read and starts from it.
//
// claimBudget states why steps 1–3 are exactly once. Step 4 settles two devices claimed for one slot of one pool
// the same way: the earlier claim (by its time, the check's send) was applied by time + Gap + Write and shows by
// time + S − δ, before the later claim's list, sent at least S after its own time; both apply the same rule
// (slotWinner).
//
// Claims are sent no later than claimWindow after the reconcile began (and every call of a pass by its deadline),
// so that a list taken long enough after a pool's deletion shows every claim made for it (see pass.finalized).
func (p *pass) claim(ctx context.Context, targets []claimTarget) []*member {
	written := p.writeClaims(ctx, targets)
	if len(written) == 0 || !p.settleWait(ctx, written) {
		return nil
	}
	// Step 4's list goes out before step 3's reads: each needs only S to have passed since the claims were
	// written, and a won claim's reload then follows its verify read closely enough for that read to serve it
	// (recentRead) instead of a GET of its own.
	fresh, err := p.r.devices.fresh(ctx)
	verified := p.verify(ctx, written)
	if err != nil {
		// The claims stand; once settled, any pass (this replica's or another's) carries them on.
		p.failed(err)
		return nil
	}
	if len(verified) == 0 {
		return nil
	}
	var won []*member
	for _, m := range verified {
		if rival := p.rival(m, fresh); rival != nil {
			p.r.log.Info("claim yields its slot", slog.String("pool", p.pool.ID), slog.Int("slot", m.own.Slot),
				slog.Int("device_id", int(m.dev.ID)), slog.Int("holder", int(rival.dev.ID)))
			p.strip(ctx, m)
			continue
		}
		p.won(m)
		won = append(won, m)
	}
	return won
}

// won notes that this replica won m's claim: it may reload the device within the lease.
func (p *pass) won(m *member) {
	p.r.notes.update(m.dev.ID, p.now(), func(n *notes) { n.wonClaim, n.shutdownAt = m.own.Claim.Nonce, time.Time{} })
}

// takeOver claims a device of the pool anew for its slot, keeping the rest of its ownership, so that this
// replica may reload it: the claim protocol, with the device's tags as the pass saw them (m.own) in place of
// eligibility. It reports whether the claim was won; m then carries it.
func (p *pass) takeOver(ctx context.Context, m *member) bool {
	prior := m.own
	written := p.writeClaims(ctx, []claimTarget{{slot: prior.Slot, dev: m.dev, prior: &prior}})
	if len(written) == 0 {
		return false
	}
	verified := p.settle(ctx, written)
	if len(verified) == 0 {
		return false
	}
	v := verified[0]
	m.own, m.dev.Tags, m.dev.Power, m.status, m.statusSent = v.own, v.dev.Tags, v.dev.Power, v.status, v.statusSent
	p.won(m)
	p.r.log.Info("claim taken over", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)), slog.Int("slot", m.own.Slot))
	return true
}

// writeClaims runs steps 1 and 2 of the claim protocol for each target, in parallel, and returns the claims it
// wrote.
func (p *pass) writeClaims(ctx context.Context, targets []claimTarget) []*attempt {
	b := budgetOf(p.r.s.ClaimSettle)
	window := p.began.Add(p.r.s.claimWindow())
	var mu sync.Mutex
	var written []*attempt
	each(ctx, p.r.s.ClaimConcurrency, targets, func(ctx context.Context, t claimTarget) {
		if !p.now().Before(window) {
			return
		}
		// A claim that cannot get the budget for its check and write in time is left to the next pass; a pause
		// of every call is reported by the calls that meet it.
		rctx, err := p.r.api.Reserve(p.sendBy(ctx, window), 2)
		if err != nil {
			p.changing()
			return
		}
		// The bound starts before the request goes out: Hivelocity read the tags at some point after this.
		sent := p.now()
		st, err := p.r.api.Status(rctx, t.dev.ID)
		if err != nil {
			if !errors.Is(err, hvclient.ErrNotFound) {
				p.failed(err)
			}
			return
		}
		p.r.notes.read(st.ID, st.Tags, p.now())
		d := t.dev
		d.Tags, d.Power = st.Tags, st.Power
		if st.Location != "" {
			d.Location = st.Location
		}
		c := Claim{At: sent.UTC().Truncate(time.Millisecond), Nonce: nonce()}
		var own Ownership
		if t.prior != nil {
			if why := changedSince(*t.prior, false, st); why != "" {
				p.r.log.Debug("takeover stopped", slog.String("pool", p.pool.ID), slog.Int("device_id", int(d.ID)), slog.String("why", why))
				p.changing()
				return
			}
			own = *t.prior
			own.Claim = c
		} else {
			if st.Reloading || eligibility(d, p.pool.Req) != "" {
				return
			}
			own = Ownership{Cluster: p.pool.ClusterID, NodePool: p.pool.ID, Slot: t.slot, Claim: c}
		}
		tags := withOwnership(st.Tags, own)
		by := sent.Add(b.Gap)
		if window.Before(by) {
			by = window
		}
		start := p.now()
		if err := p.r.api.SetTags(p.sendBy(rctx, by), d.ID, tags); err != nil {
			// An unanswered write may have landed; the device then holds a claim nobody carries on, which is
			// taken over once it is adoptAfter old.
			switch {
			case errors.Is(err, hvclient.ErrRejected):
				p.refused(&member{dev: d}, callClaim, err)
				p.noteClaimRefused(d.ID)
			case !errors.Is(err, hvclient.ErrLate):
				p.failed(err)
			}
			p.changing()
			return
		}
		p.r.refused.clear(d.ID)
		answered := p.now()
		p.r.notes.wrote(d.ID, tags, answered, p.r.s.ClaimSettle)
		a := &attempt{claimTarget: claimTarget{slot: t.slot, dev: d, prior: t.prior}, own: own, answered: answered,
			trusted: b.Trusted(answered.Sub(start))}
		mu.Lock()
		written = append(written, a)
		mu.Unlock()
	})
	if len(written) > 0 {
		p.r.devices.invalidate()
	}
	return written
}

// settle waits until ClaimSettle has passed since the last write's answer, then reads each claim back (step 3)
// and returns, as claimed members, those that carry their nonce and whose write was within the budget.
func (p *pass) settle(ctx context.Context, written []*attempt) []*member {
	if !p.settleWait(ctx, written) {
		return nil
	}
	return p.verify(ctx, written)
}

// settleWait waits until ClaimSettle has passed since the last write's answer; false if ctx ended first.
func (p *pass) settleWait(ctx context.Context, written []*attempt) bool {
	var last time.Time
	for _, a := range written {
		if a.answered.After(last) {
			last = a.answered
		}
	}
	select {
	case <-p.r.clock.After(last.Add(p.r.s.ClaimSettle).Sub(p.now())):
		return true
	case <-ctx.Done():
		return false
	}
}

// verify reads each claim back once it has settled (step 3) and returns, as claimed members, those that carry
// their nonce and whose write was within the budget; it untags the spares whose claim stands but overran.
func (p *pass) verify(ctx context.Context, written []*attempt) []*member {
	var mu sync.Mutex
	var out, overran []*member
	each(ctx, p.r.s.ClaimConcurrency, written, func(ctx context.Context, a *attempt) {
		sent := p.now()
		st, err := p.r.api.Status(ctx, a.dev.ID)
		if err != nil {
			if !errors.Is(err, hvclient.ErrNotFound) {
				p.failed(err)
			}
			return
		}
		p.r.notes.read(a.dev.ID, st.Tags, p.now())
		got, _ := ownershipOf(st.Tags)
		if got.NodePool != p.pool.ID || !got.Claim.Equal(a.own.Claim) {
			p.r.log.Debug("claim lost to another", slog.String("pool", p.pool.ID), slog.Int("device_id", int(a.dev.ID)))
			return
		}
		d := a.dev
		d.Tags, d.Power = st.Tags, st.Power
		m := &member{dev: d, own: got, status: &st, statusSent: sent, settled: true, state: StateClaimed, since: a.own.Claim.At}
		if !a.trusted {
			// Another claim may have verified before this one showed: neither goes on, and the device is freed
			// (a takeover leaves it to the next pass).
			p.r.log.Info("claim write overran its budget; not trusted", slog.String("pool", p.pool.ID), slog.Int("device_id", int(a.dev.ID)))
			p.changing()
			if a.prior == nil {
				mu.Lock()
				overran = append(overran, m)
				mu.Unlock()
			}
			return
		}
		mu.Lock()
		out = append(out, m)
		mu.Unlock()
	})
	for _, m := range overran {
		p.strip(ctx, m)
	}
	return out
}

// rival returns the device that keeps m's slot instead of m, as a fresh list shows the pool's devices, or nil.
func (p *pass) rival(m *member, fresh *snapshot) *member {
	keeper := m
	for i := range fresh.devices {
		d := fresh.devices[i] // a copy: the snapshot is shared
		if d.ID == m.dev.ID {
			continue
		}
		d.Tags = p.r.notes.tagsOf(d, fresh.taken)
		own, owned := ownershipOf(d.Tags)
		if !owned || own.NodePool != p.pool.ID || own.Slot != m.own.Slot || !own.ReleaseAt.IsZero() {
			continue
		}
		n := p.r.notes.get(d.ID)
		other := &member{dev: d, own: own}
		other.state, _, _ = classify(own, p.pool.Spec, observation{power: d.Power, done: n.ended && n.reloadAt.Equal(own.ReloadAt)})
		keeper = slotWinner(keeper, other)
	}
	if keeper == m {
		return nil
	}
	return keeper
}

// each runs fn for every item, at most limit at once, and waits for all.
func each[T any](ctx context.Context, limit int, items []T, fn func(ctx context.Context, item T)) {
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(ctx, it)
		})
	}
	wg.Wait()
}
