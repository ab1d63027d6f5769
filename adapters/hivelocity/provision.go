package hivelocity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// remediate takes out every device whose reload failed or ran past the pool's timeouts, at most MaxUnhealthy of
// the pool's devices at once (counting those already being taken out): it tags the device with the permanent-error
// value to write (KeyRemediate), which takes it out of the pool's slots so that fill claims a replacement, then
// powers it off and wipes it (the release path), and marks it caphv-permanent-error once the wipe has ended and
// its slot's replacement is provisioned under the slot's next generation (so that the generation, kept in the
// tags, is never lost). The devices held back are counted for the report.
func (p *pass) remediate(ctx context.Context) {
	now := p.now()
	var stuck []*member
	inRemediation := 0
	for _, m := range p.members {
		if m.state == StateRemediating { // until it is marked, wiped or not
			inRemediation++
			continue
		}
		if _, ok := stuckWhy(m, now, p.pool.OffTimeout, p.pool.OnTimeout, p.r.notes.get(m.dev.ID).installingSince); ok {
			stuck = append(stuck, m)
		}
	}
	take, held := admit(p.pool.MaxUnhealthy, inRemediation, stuck)
	p.mu.Lock()
	p.held, p.inRemediation = len(held), inRemediation+len(take)
	p.mu.Unlock()
	for _, m := range take {
		if p.paused() || p.backingOff(m) {
			continue
		}
		why, _ := stuckWhy(m, now, p.pool.OffTimeout, p.pool.OnTimeout, p.r.notes.get(m.dev.ID).installingSince)
		own := m.own
		own.Remediate = why
		if err := p.write(ctx, m, withOwnership(m.dev.Tags, own)); err != nil {
			p.failed(err)
			continue
		}
		p.r.log.Warn("device taken out of the pool: it is powered off, wiped, marked and replaced", slog.String("pool", p.pool.ID),
			slog.Int("device_id", int(m.dev.ID)), slog.Int("slot", m.own.Slot), slog.String("why", why))
		m.state, m.since = StateRemediating, now
		p.remediated = append(p.remediated, remediation{DeviceID: m.dev.ID, Slot: m.own.Slot,
			Why: KeyPermanentError + "=" + why, At: now.UTC().Truncate(time.Second)})
	}
	for _, m := range slices.Clone(p.members) { // mark drops members
		if m.state == StateRemediating && !p.paused() && !p.backingOff(m) {
			p.takeOut(ctx, m)
		}
	}
}

// takeOut carries the remediation of m on: power off and wipe, then, once the wipe has ended (or failed, or got
// stuck itself: the device is given up on either way) and the slot no longer needs its generation, the mark.
func (p *pass) takeOut(ctx context.Context, m *member) {
	switch {
	case m.own.ReleaseAt.IsZero():
		p.powerOffThen(ctx, m, p.wipe)
		return
	case !m.ended:
		if why, stuck := stuckWhy(m, p.now(), p.pool.OffTimeout, p.pool.OnTimeout, p.r.notes.get(m.dev.ID).installingSince); stuck {
			p.r.log.Warn("the wipe of a device taken out did not end: marking it anyway", slog.String("pool", p.pool.ID),
				slog.Int("device_id", int(m.dev.ID)), slog.String("wipe", why))
			break
		}
		p.waiting()
		return
	case !p.finalizing && m.own.Slot < p.pool.Replicas+p.pool.MaxSurge && !p.replaced(m):
		p.changing() // the replacement's reload carries the next generation: mark once it has started
		return
	}
	if err := p.write(ctx, m, permanentError(m.dev.Tags, m.own.Remediate)); err != nil {
		p.failed(err)
		return
	}
	p.r.log.Warn("device marked with a permanent error", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)),
		slog.String("why", m.own.Remediate))
	p.members = dropMembers(p.members, map[*member]bool{m: true})
}

// replaced reports whether m's slot holds a device provisioned at a later generation than m's.
func (p *pass) replaced(m *member) bool {
	return slices.ContainsFunc(p.members, func(o *member) bool {
		return o != m && o.state != StateRemediating && o.own.Slot == m.own.Slot && o.own.Spec != "" && o.own.Gen > m.own.Gen
	})
}

// genOf is the slot generation m is provisioned at: its own, or one past that of any device of its slot being
// taken out.
func (p *pass) genOf(m *member) int {
	gen := m.own.Gen
	for _, o := range p.members {
		if o != m && o.state == StateRemediating && o.own.Slot == m.own.Slot {
			gen = max(gen, o.own.Gen+1)
		}
	}
	return gen
}

// noteStopping marks the outdated devices this replica asked to shut down: a roll counts them as down.
func (p *pass) noteStopping() {
	for _, m := range p.members {
		m.stopping = m.state == StateOutdated && !p.r.notes.get(m.dev.ID).shutdownAt.IsZero()
	}
}

// release carries the release of devices on: the ones the plan gives up, and the ones being wiped. A claimed
// device was never reloaded by the pool and is only untagged; a reloaded one is shut down, wiped (reloaded with
// no user data, SSH key or pool hostname) and then untagged. A device still reloading for the pool is released
// once its reload ends, and a claim another replica may still lose is left to settle.
func (p *pass) release(ctx context.Context, ms []*member) {
	for _, m := range ms {
		if p.paused() {
			return
		}
		if p.backingOff(m) {
			continue
		}
		switch {
		case !m.settled:
			p.changing()
		case m.state == StateClaimed:
			p.strip(ctx, m)
		case (m.state == StateReady || m.state == StateOutdated || m.state == StateOff) && p.finalizing:
			// The pool is deleted: its devices serve nobody, so a graceful shutdown would only cost a call and a
			// wait per device, as for a claimed spare (provisionSpare). The wipe powers the device off itself.
			p.wipe(ctx, m, m.dev.Power != hvclient.PowerOff)
		case m.state == StateReady || m.state == StateOutdated || m.state == StateOff:
			p.powerOffThen(ctx, m, p.wipe)
		default: // reloading, installing: wait for the reload to end
			p.waiting()
		}
	}
	for _, m := range slices.Clone(p.members) { // strip drops members
		if m.state != StateReleasing || p.paused() || p.backingOff(m) {
			continue
		}
		if m.ended && !m.failed {
			p.strip(ctx, m)
			continue
		}
		p.waiting()
	}
}

// progress carries on with the pool's kept devices: claimed ones are reloaded at once (by the replica that
// claimed them, or by any once the claimer had time enough), reloaded ones that are off are booted, and the
// plan's outdated devices are re-provisioned.
func (p *pass) progress(ctx context.Context, pl plan) {
	for _, m := range pl.keep {
		if p.paused() {
			return
		}
		if p.backingOff(m) {
			continue
		}
		switch {
		case m.state == StateClaimed && m.adopted:
			p.provisionSpare(ctx, m)
		case slices.Contains(pl.roll, m):
			p.powerOffThen(ctx, m, p.provision)
		case m.state == StateOff && m.current:
			p.boot(ctx, m)
		case m.state == StateReloading || m.state == StateInstalling || m.state == StateOutdated:
			p.waiting() // for a reload to end: its own, or the one the roll waits for
		case m.state != StateReady:
			p.changing()
		}
	}
}

// powerOffThen calls next once the device is off: it asks a running device to shut down, and if the device
// ignores that for ShutdownTimeout, calls next with skipPowerCheck (the reload then powers it off itself).
func (p *pass) powerOffThen(ctx context.Context, m *member, next func(ctx context.Context, m *member, skipPowerCheck bool)) {
	if m.dev.Power == hvclient.PowerOff {
		next(ctx, m, false)
		return
	}
	now := p.now()
	asked := p.r.notes.get(m.dev.ID).shutdownAt
	switch {
	case asked.IsZero():
		p.changing()
		if err := p.r.api.Power(ctx, m.dev.ID, hvclient.PowerShutdown); err != nil {
			p.refusedOrFailed(m, callShutdown, err)
			return
		}
		p.accepted(m)
		p.r.devices.invalidate()
		p.r.notes.update(m.dev.ID, now, func(n *notes) { n.shutdownAt = now })
		p.wakeAt(now.Add(p.r.s.ShutdownTimeout))
	case now.Sub(asked) >= p.r.s.ShutdownTimeout:
		next(ctx, m, true)
	default:
		p.changing()
		p.wakeAt(asked.Add(p.r.s.ShutdownTimeout))
	}
}

// provisionSpare reloads a claimed device at once, powered on or not (skipPowerCheck): it is a spare that serves
// nobody, so a graceful shutdown buys nothing and would cost a call and a wait per device.
func (p *pass) provisionSpare(ctx context.Context, m *member) {
	p.provision(ctx, m, m.dev.Power != hvclient.PowerOff)
}

// provision starts the reload that provisions m with the pool's spec: its OS (as the product names it), its
// hostname, SSH key and user data, and the ownership tags with the spec hash and the reload's start.
func (p *pass) provision(ctx context.Context, m *member, skipPowerCheck bool) {
	osName, err := p.r.lookups.osName(ctx, m.dev.ProductID, p.pool.OSName)
	if err != nil {
		p.failed(err)
		return
	}
	keyID, err := p.r.lookups.sshKeyID(ctx, p.pool.SSHKeyName)
	if err != nil {
		p.failed(err)
		return
	}
	now := p.now()
	own := m.own
	own.Cluster, own.NodePool, own.Spec = p.pool.ClusterID, p.pool.ID, p.pool.Spec
	own.ReloadAt, own.ReleaseAt, own.Gen = now.Truncate(time.Second), time.Time{}, p.genOf(m)
	r := hvclient.Reload{OSName: osName, Hostname: p.pool.Hostname(own.Slot, own.Gen), Script: p.pool.Userdata, SSHKeyID: keyID,
		Tags: withOwnership(m.dev.Tags, own), SkipPowerCheck: skipPowerCheck}
	p.reload(ctx, m, own, r, StateReloading)
}

// wipe starts the reload that releases m: no user data, no SSH key, a spare's hostname, and tags that keep the
// device the pool's (so that no pool claims it mid-wipe) and say it is being released — or, for a device being
// taken out, keep its slot, generation and remediation tags.
func (p *pass) wipe(ctx context.Context, m *member, skipPowerCheck bool) {
	osName := m.dev.OSName
	if osName == "" {
		var err error
		if osName, err = p.r.lookups.osName(ctx, m.dev.ProductID, p.pool.OSName); err != nil {
			p.failed(err)
			return
		}
	}
	at := p.now().Truncate(time.Second)
	own := Ownership{Cluster: m.own.Cluster, NodePool: m.own.NodePool, Slot: -1, ReloadAt: at, ReleaseAt: at}
	state := StateReleasing
	if m.own.Remediate != "" {
		own.Slot, own.Gen, own.Remediate, state = m.own.Slot, m.own.Gen, m.own.Remediate, StateRemediating
	}
	r := hvclient.Reload{OSName: osName, Hostname: fmt.Sprintf("spare-%d.%s", m.dev.ID, p.r.s.BaseDomain),
		Tags: withOwnership(m.dev.Tags, own), SkipPowerCheck: skipPowerCheck}
	p.reload(ctx, m, own, r, state)
}

// reload sends a reload and notes it, only under a claim this replica holds (see holds) and only if a read of
// the device taken just before (GET /device/{id}, the reload sent within claimGap of it) still shows the state
// the pass acted on: the same owner and claim, and no reload started since. It never relies on Hivelocity
// refusing a second reload. The reload's tags are the fresh read's operator tags and own. A refusal (the device
// is already reloading, or still on) is not a failure: the next pass sees why.
func (p *pass) reload(ctx context.Context, m *member, own Ownership, r hvclient.Reload, state State) {
	p.waiting()
	if !p.holds(ctx, m) {
		return
	}
	own.Claim = m.own.Claim // a takeover wrote a new one
	deadline := m.own.Claim.At.Add(p.r.s.lease())
	st, sent, rctx, err := p.readBeforeReload(ctx, m, deadline)
	if err != nil {
		if !errors.Is(err, hvclient.ErrNotFound) {
			p.failed(err)
		}
		return
	}
	if why := changedSince(m.own, reloadingKnown(m), st); why != "" {
		p.r.log.Info("reload not sent: the device changed", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)), slog.String("why", why))
		p.changing()
		p.r.devices.invalidate()
		return
	}
	r.Tags = withOwnership(st.Tags, own)
	by := sent.Add(p.r.s.claimGap())
	if deadline.Before(by) {
		by = deadline
	}
	// A reload is applied by its answer; one that gets none within reloadTimeout is taken not to be applied
	// later either (adoptAfter counts on it).
	cctx, cancel := context.WithTimeout(p.sendBy(rctx, by), p.r.s.reloadTimeout())
	err = p.r.api.Reload(cctx, m.dev.ID, r)
	cancel()
	if err != nil {
		p.changing()
		if !errors.Is(err, hvclient.ErrRejected) {
			p.failed(err)
			return
		}
		p.refused(m, reloadCall(state), err)
		p.r.devices.invalidate()
		return
	}
	p.accepted(m)
	now := p.now()
	p.r.devices.invalidate()
	p.r.notes.wrote(m.dev.ID, r.Tags, now, p.r.s.ClaimSettle)
	p.r.notes.update(m.dev.ID, now, func(n *notes) {
		reloadNotes(n, own.ReloadAt)
		n.startedAt, n.osBefore, n.osTarget, n.shutdownAt = now, m.dev.OSName, r.OSName, time.Time{}
	})
	p.r.log.Info("reload started", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)),
		slog.String("hostname", r.Hostname), slog.String("os", r.OSName), slog.Bool("release", state == StateReleasing))
	m.own, m.dev.Tags, m.dev.Power, m.status = own, r.Tags, hvclient.PowerOff, nil
	m.state, m.ended, m.failed, m.current, m.since = state, false, false, own.Spec == p.pool.Spec, now
	p.wakeAt(own.ReloadAt.Add(p.pool.OffTimeout))
}

// holds reports whether this replica may reload m: it won m's current claim and the claim's lease runs, or it
// takes the claim over now (see takeOver) — a claim it did not win only once the claim is adoptAfter old, so
// that the winner's reload, sent within the lease, shows first.
func (p *pass) holds(ctx context.Context, m *member) bool {
	now := p.now()
	c := m.own.Claim
	mine := c.Nonce != "" && p.r.notes.get(m.dev.ID).wonClaim == c.Nonce
	if mine && now.Before(c.At.Add(p.r.s.lease())) {
		return true
	}
	if !mine && c.Nonce != "" && now.Sub(c.At) < p.r.s.AdoptAfter() {
		p.changing()
		p.wakeAt(c.At.Add(p.r.s.AdoptAfter()))
		return false
	}
	return p.takeOver(ctx, m)
}

// reloadingKnown reports whether the pass saw m's reload running, so that a running reload is no change to it.
func reloadingKnown(m *member) bool {
	if m.status != nil && m.status.Reloading {
		return true
	}
	switch m.state {
	case StateReloading, StateInstalling, StateReleasing, StateFailed:
		return true
	default:
		return false
	}
}

// strip removes the provisioner's tags from a device, which leaves the pool; the operator's tags stay. It starts
// from a fresh read of the device (writeFresh) and stops if the device changed since the pass looked.
func (p *pass) strip(ctx context.Context, m *member) {
	err := p.writeFresh(ctx, m, func(tags []string) ([]string, bool) { return operatorTags(tags), true })
	if err != nil {
		p.failed(err)
		return
	}
	p.r.notes.update(m.dev.ID, p.now(), func(n *notes) { n.shutdownAt, n.wonClaim = time.Time{}, "" })
	p.r.log.Info("device released", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)))
	p.members = dropMembers(p.members, map[*member]bool{m: true})
}

// boot powers on a provisioned device found off.
func (p *pass) boot(ctx context.Context, m *member) {
	p.changing()
	if err := p.r.api.Power(ctx, m.dev.ID, hvclient.PowerBoot); err != nil {
		p.refusedOrFailed(m, callBoot, err)
		return
	}
	p.accepted(m)
	p.r.devices.invalidate()
}

// readBeforeReload returns the read a reload starts from, when its request was sent, and a context with the
// budget for the reload (and the read) reserved: this pass's last read of the device if it is recent enough
// (see recentRead), else a fresh one.
func (p *pass) readBeforeReload(ctx context.Context, m *member, deadline time.Time) (hvclient.Status, time.Time, context.Context, error) {
	if st, sent, rctx, ok := p.recentRead(ctx, m); ok {
		return st, sent, rctx, nil
	}
	return p.freshRead(p.sendBy(ctx, deadline), m.dev.ID)
}

// recentRead returns this pass's read of m (a claim's verify read, or the status read that saw its reload end)
// when it was sent less than half of claimGap ago and showed what Hivelocity answered (not a quiet read), with a
// context whose next request has its budget and goes out within claimGap of that read's send. ok is false when
// there is no such read or the budget cannot be had in time: the caller then reads afresh. It saves the GET
// before a freshly claimed spare's reload and before a released device's untagging.
func (p *pass) recentRead(ctx context.Context, m *member) (hvclient.Status, time.Time, context.Context, bool) {
	if m.status == nil || m.quiet || m.statusSent.IsZero() || p.now().Sub(m.statusSent) >= p.r.s.claimGap()/2 {
		return hvclient.Status{}, time.Time{}, nil, false
	}
	rctx, err := p.r.api.Reserve(p.sendBy(ctx, m.statusSent.Add(p.r.s.claimGap())), 1)
	if err != nil {
		return hvclient.Status{}, time.Time{}, nil, false
	}
	return *m.status, m.statusSent, rctx, true
}

// freshRead reserves the budget for a read of the device and the call that follows it, then reads it
// (GET /device/{id}). It returns the read, when its request was sent (the bound a following write or reload is
// sent within), and the context whose next request goes out without waiting for the budget.
func (p *pass) freshRead(ctx context.Context, id int32) (hvclient.Status, time.Time, context.Context, error) {
	rctx, err := p.r.api.Reserve(ctx, 2)
	if err != nil {
		return hvclient.Status{}, time.Time{}, nil, err
	}
	sent := p.now()
	st, err := p.r.api.Status(rctx, id)
	if err != nil {
		return hvclient.Status{}, time.Time{}, nil, err
	}
	p.r.notes.read(id, st.Tags, p.now())
	return st, sent, rctx, nil
}

// errDeviceChanged: a tag write or reload was not sent because the device's fresh read no longer shows what the
// pass acted on (see changedSince). It is no failure: the next pass sees the device as it is.
var errDeviceChanged = errors.New("the device changed since the pass looked at it")

// write replaces m's tags with tags, computed by the caller from m.dev.Tags: it applies that change to a fresh read
// of the device (rebase), so that a concurrent change of other tags stays, and stops as writeFresh does.
func (p *pass) write(ctx context.Context, m *member, tags []string) error {
	base := m.dev.Tags
	return p.writeFresh(ctx, m, func(fresh []string) ([]string, bool) { return rebase(base, tags, fresh), true })
}

// writeFresh is the one way the provisioner writes a device's tags outside a claim (which has its own check): it
// reads the device (GET /device/{id}; this pass's read of it serves when recent enough, see recentRead), stops with errDeviceChanged if the device changed owner or claim, or
// started reloading, since the state the pass acted on (m), and otherwise sends mutate's list within claimGap
// (ClaimSettle/5) of sending the read, so the list is never built from anything older. mutate returning false
// writes nothing. The write's round trip is timed; m is updated on success.
func (p *pass) writeFresh(ctx context.Context, m *member, mutate func(tags []string) ([]string, bool)) error {
	p.changing()
	st, sent, rctx, ok := p.recentRead(ctx, m)
	var err error
	if !ok {
		st, sent, rctx, err = p.freshRead(ctx, m.dev.ID)
	}
	if err != nil {
		if errors.Is(err, hvclient.ErrNotFound) {
			return fmt.Errorf("%w: device %d is gone", errDeviceChanged, m.dev.ID)
		}
		return err
	}
	if why := changedSince(m.own, reloadingKnown(m), st); why != "" {
		p.r.devices.invalidate()
		return fmt.Errorf("%w: device %d %s", errDeviceChanged, m.dev.ID, why)
	}
	tags, ok := mutate(st.Tags)
	if !ok {
		return nil
	}
	start := p.now()
	if err := p.r.api.SetTags(p.sendBy(rctx, sent.Add(p.r.s.claimGap())), m.dev.ID, tags); err != nil {
		if errors.Is(err, hvclient.ErrRejected) {
			p.refused(m, callTagWrite, err)
		}
		return err
	}
	p.accepted(m)
	answered := p.now()
	if rtt := answered.Sub(start); !budgetOf(p.r.s.ClaimSettle).Trusted(rtt) {
		p.r.log.Info("tag write overran the claim budget", slog.String("pool", p.pool.ID), slog.Int("device_id", int(m.dev.ID)), slog.Duration("round_trip", rtt))
	}
	p.r.devices.invalidate()
	p.r.notes.wrote(m.dev.ID, tags, answered, p.r.s.ClaimSettle)
	m.dev.Tags = tags
	m.own, _ = ownershipOf(tags)
	m.statusSent = time.Time{} // the read no longer shows the tags: a later write or reload reads afresh
	return nil
}
