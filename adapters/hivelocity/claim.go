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
		p.powerOffThen(ctx, m, p.provision)
	}
}

// candidates returns the spares whose product offers the pool's OS, in the pool's rendezvous order, and counts
// the others as skipped.
func (p *pass) candidates(ctx context.Context) []hvclient.Device {
	var out []hvclient.Device
	ordered := rendezvous(p.pool.ID, p.spares)
	for i := range ordered {
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

// claimTarget is a spare device to claim for a slot.
type claimTarget struct {
	slot int
	dev  hvclient.Device
}

// attempt is a claim whose nonce was written.
type attempt struct {
	claimTarget
	own   Ownership
	wrote time.Time
}

// claim claims the targets, exactly once each even against replicas of other pools (and of this one) claiming
// the same devices at the same time, although the API replaces a device's whole tag list and a write may take a
// while to show in reads. For each target, in parallel:
//
//  1. GET the device afresh; give up if it is no longer eligible (another pool's tags, a permanent error);
//  2. PUT its tags with the pool's ownership and a new claim (time and nonce), within ClaimSettle/5 of the GET
//     (the budget for both calls is reserved up front, and a write that could not go out in time is not sent);
//
// then, once ClaimSettle has passed since the last write:
//
//  3. GET each device again and go on only with those that still carry this claim's nonce;
//  4. list the devices afresh and yield any slot another device of the pool holds with an earlier claim (or a
//     reloaded device), untagging the device this pass claimed.
//
// Why it is exactly once, given that a tag write shows in reads within δ, with 2δ + ClaimSettle/5 ≤ ClaimSettle:
// of two claims of one device written at a ≤ c, the later one's GET came at most ClaimSettle/5 before c. If that
// GET missed the earlier write, that write showed only after it, so c - ClaimSettle/5 < a + δ and the later write
// shows by c + δ < a + ClaimSettle: the earlier claimer's step 3 sees the later nonce and gives up, while the later
// one sees its own, the last write. If the GET saw it, the later claimer gave up in step 1. Either way one
// claimer goes on. Step 4 settles two devices claimed for one slot of one pool the same way: the later claim
// (by its time, which is within ClaimSettle/5 of its write) sees the earlier in its list, and both apply the same
// rule (slotWinner).
//
// Claims are sent no later than claimWindow after the reconcile began (and every call of a pass by its deadline),
// so that a list taken long enough after a pool's deletion shows every claim made for it (see pass.finalized).
func (p *pass) claim(ctx context.Context, targets []claimTarget) []*member {
	settle, gap := p.r.s.ClaimSettle, p.r.s.claimGap()
	window := p.began.Add(p.r.s.claimWindow())
	var mu sync.Mutex
	var written []*attempt
	each(ctx, p.r.s.ClaimConcurrency, targets, func(ctx context.Context, t claimTarget) {
		if !p.now().Before(window) {
			return
		}
		// A claim that cannot get the budget for its check and write in time is left to the next pass; a pause
		// of every call is reported by the calls that meet it.
		rctx, err := p.r.api.Reserve(hvclient.SendBy(ctx, window), 2)
		if err != nil {
			p.changing()
			return
		}
		d, err := p.r.api.GetDevice(rctx, t.dev.ID)
		if err != nil {
			if !errors.Is(err, hvclient.ErrNotFound) {
				p.failed(err)
			}
			return
		}
		checked := p.now()
		p.r.notes.read(d.ID, d.Tags, checked)
		if eligibility(d, p.pool.Req) != "" {
			return
		}
		own := Ownership{Cluster: p.pool.ClusterID, NodePool: p.pool.ID, Slot: t.slot, Claim: Claim{At: checked.UTC().Truncate(time.Millisecond), Nonce: nonce()}}
		tags := withOwnership(d.Tags, own)
		by := checked.Add(gap)
		if window.Before(by) {
			by = window
		}
		if err := p.r.api.SetTags(hvclient.SendBy(rctx, by), d.ID, tags); err != nil {
			// An unanswered write may have landed; the device then holds a claim that settles like any other.
			if !errors.Is(err, hvclient.ErrLate) {
				p.failed(err)
			}
			return
		}
		wrote := p.now()
		p.r.notes.wrote(d.ID, tags, wrote, settle)
		mu.Lock()
		written = append(written, &attempt{claimTarget: claimTarget{slot: t.slot, dev: d}, own: own, wrote: wrote})
		mu.Unlock()
	})
	if len(written) == 0 {
		return nil
	}
	p.r.devices.invalidate()
	var last time.Time
	for _, a := range written {
		if a.wrote.After(last) {
			last = a.wrote
		}
	}
	select {
	case <-p.r.clock.After(last.Add(settle).Sub(p.now())):
	case <-ctx.Done():
		return nil
	}
	verified := p.verify(ctx, written)
	if len(verified) == 0 {
		return nil
	}
	fresh, err := p.r.devices.fresh(ctx)
	if err != nil {
		// The claims stand; once settled, any pass (this replica's or another's) carries them on.
		p.failed(err)
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
		p.r.notes.update(m.dev.ID, p.now(), func(n *notes) { n.wonClaim, n.shutdownAt = m.own.Claim.Nonce, time.Time{} })
		won = append(won, m)
	}
	return won
}

// verify reads each written claim back and returns, as claimed members, those that still carry their nonce.
func (p *pass) verify(ctx context.Context, written []*attempt) []*member {
	var mu sync.Mutex
	var out []*member
	each(ctx, p.r.s.ClaimConcurrency, written, func(ctx context.Context, a *attempt) {
		st, err := p.r.api.Status(ctx, a.dev.ID)
		if err != nil {
			if !errors.Is(err, hvclient.ErrNotFound) {
				p.failed(err)
			}
			return
		}
		now := p.now()
		p.r.notes.read(a.dev.ID, st.Tags, now)
		got, _ := ownershipOf(st.Tags)
		if got.NodePool != p.pool.ID || !got.Claim.Equal(a.own.Claim) {
			p.r.log.Debug("claim lost to another", slog.String("pool", p.pool.ID), slog.Int("device_id", int(a.dev.ID)))
			return
		}
		d := a.dev
		d.Tags, d.Power = st.Tags, st.Power
		m := &member{dev: d, own: got, status: &st, settled: true, state: StateClaimed, since: a.own.Claim.At}
		mu.Lock()
		out = append(out, m)
		mu.Unlock()
	})
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
