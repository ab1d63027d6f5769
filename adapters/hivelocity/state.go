package hivelocity

import (
	"cmp"
	"slices"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// State is where a device of a pool stands; it is the state reported in the pool's data.
//
//	(eligible) ──claim──▶ claimed ─────reload─────────▶ reloading ──installer boots──▶ installing ──▶ ready
//	                         │                               │ stuck past a timeout, or failed     │  │
//	                         │                               ▼                                     │  │ powered off
//	                         │   remediating: shutdown, wipe, then caphv-permanent-error (leaves)  │  ▼
//	                         │                                                                     │ off ──boot──▶ ready
//	                         └──────── release: untag ◀── releasing ◀── shutdown, wipe reload ◀────┘
//
// A ready device whose spec tag is not the pool's is reported "outdated" and re-provisioned (shutdown, reload)
// within the pool's MaxUnavailable, or replaced by a surge (see decide).
type State string

// Device states.
const (
	StateClaimed    State = "claimed"    // tagged for the pool, not reloaded yet
	StateReloading  State = "reloading"  // a reload runs, powered off (the installer has not booted)
	StateInstalling State = "installing" // a reload runs, powered on (the installer runs)
	StateReady      State = "ready"      // reloaded with the pool's spec, powered on
	StateOutdated   State = "outdated"   // reloaded with an earlier spec, powered on
	StateOff        State = "off"        // reloaded, but powered off
	StateFailed     State = "failed"     // the reload failed or is stuck: about to be marked and replaced
	StateReleasing  State = "releasing"  // being wiped before it is untagged
	// StateRemediating is a device that failed or got stuck being taken out: powered off, wiped, then marked
	// caphv-permanent-error once its slot's replacement is provisioned.
	StateRemediating State = "remediating"
)

// member is one device a pool owns, as this pass sees it.
type member struct {
	dev hvclient.Device // as listed, with the tags the provisioner knows to be newer than the list
	own Ownership
	// status is a fresh GET /device/{id} of this pass, if one was made; statusSent is when its request was sent,
	// so that a reload or tag write right after it can start from it (see reusable).
	status     *hvclient.Status
	statusSent time.Time
	// quiet is true when status showed the reload not running but the stable-end rule does not prove it over
	// yet: status then says Reloading, which is what the pass believes, not what Hivelocity answered.
	quiet bool
	// ended is true once the reload own.ReloadAt names is known to have ended (well, unless failed is set).
	ended, failed bool
	// settled is false for a claim too young for its outcome to be final (another replica may still lose it).
	settled bool
	// adopted is true for a claim this replica may carry on: one it won, or one whose claimer has had ample
	// time to carry it on itself (and may have died).
	adopted bool
	// current is true when the device was reloaded with the pool's spec.
	current bool
	// stopping is true while this replica waits for the device to power off for a roll: it counts as down.
	stopping bool
	state    State
	since    time.Time
}

// observation is what is known of a device besides its tags: its power, a fresh status, and whether its last
// reload is known to have ended well.
type observation struct {
	power  string
	status *hvclient.Status
	done   bool
}

// classify decides a device's state from its tags and what is known of it. Without a fresh status or the
// knowledge that its reload ended, a reloaded device is taken to be still reloading: powered off, the installer
// has not booted; powered on, it installs.
func classify(own Ownership, spec string, ob observation) (state State, ended, failed bool) {
	power, reloading := ob.power, false
	ended = ob.done
	if st := ob.status; st != nil {
		power, reloading = st.Power, st.Reloading
		failed = !reloading && st.SPSStatus == hvclient.ProvisioningFailed
		ended = !reloading
	}
	switch {
	case own.Remediate != "":
		return StateRemediating, ended, failed
	case !own.ReleaseAt.IsZero():
		return StateReleasing, ended, failed
	case own.Spec == "":
		return StateClaimed, false, false
	case failed:
		return StateFailed, true, true
	case ended && power == hvclient.PowerOn && own.Spec == spec:
		return StateReady, true, false
	case ended && power == hvclient.PowerOn:
		return StateOutdated, true, false
	case ended:
		return StateOff, true, false
	case power == hvclient.PowerOn:
		return StateInstalling, false, false
	default:
		return StateReloading, false, false
	}
}

// available reports whether a state serves the pool.
func available(s State) bool { return s == StateReady || s == StateOutdated }

// keepRank orders devices that share a slot: the most advanced one keeps it.
func keepRank(s State) int {
	switch s {
	case StateReady, StateOutdated:
		return 5
	case StateReloading, StateInstalling:
		return 4
	case StateOff:
		return 3
	case StateFailed:
		return 2
	default:
		return 1
	}
}

// releaseRank orders devices for release, lowest first: claimed, provisioning, failed, powered off, then ready.
func releaseRank(s State) int {
	switch s {
	case StateClaimed:
		return 0
	case StateReloading, StateInstalling:
		return 1
	case StateFailed:
		return 2
	case StateOff:
		return 3
	default:
		return 4
	}
}

// slotWinner says which of two devices that claim one slot keeps it: the more advanced one, then the earlier
// claim, then the lower device id. Every replica applies the same rule to what it sees, and the claim protocol
// makes the later of two claims see the earlier, so two claims of one slot never both go on to be reloaded.
func slotWinner(a, b *member) *member {
	if c := cmp.Or(
		cmp.Compare(keepRank(b.state), keepRank(a.state)),
		a.own.Claim.At.Compare(b.own.Claim.At),
		cmp.Compare(a.dev.ID, b.dev.ID),
	); c > 0 {
		return b
	}
	return a
}

// releaseOrder sorts devices in the order a scale-down releases them: claimed, provisioning, failed, powered
// off, then ready ones — outdated before current, highest slot first, highest device id first.
func releaseOrder(ms []*member) []*member {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, func(a, b *member) int {
		return cmp.Or(
			cmp.Compare(releaseRank(a.state), releaseRank(b.state)),
			cmp.Compare(outdatedFirst(a.state), outdatedFirst(b.state)),
			cmp.Compare(b.own.Slot, a.own.Slot),
			cmp.Compare(b.dev.ID, a.dev.ID),
		)
	})
	return out
}

func outdatedFirst(s State) int {
	if s == StateOutdated {
		return 0
	}
	return 1
}

// limits are what decide plans a pool against: its replicas and the bounds of its spec (see Pool), and whether
// spares were seen (a surge needs them).
type limits struct {
	replicas, maxUnavailable, maxSurge int
	spares                             bool
}

// limitsOf returns the pool's limits.
func limitsOf(p Pool, spares bool) limits {
	return limits{replicas: p.Replicas, maxUnavailable: p.MaxUnavailable, maxSurge: p.MaxSurge, spares: spares}
}

// plan is what a pass does to a pool's devices besides carrying on with running work.
type plan struct {
	// release are the devices to release, in order: losers of shared slots, the excess over replicas, and
	// outdated devices a surge replaced.
	release []*member
	// keep are the devices the pool keeps, by slot.
	keep []*member
	// roll are the outdated devices to re-provision now, in place.
	roll []*member
	// slots are the slots to claim devices for (as many as are missing, and the surge), lowest first.
	slots []int
}

// decide plans a pool from its devices (those being released or taken out aside). A slot shared by several
// devices is kept by slotWinner's choice; the devices beyond replicas are released in releaseOrder; the missing
// ones are claimed for the lowest free slots. While devices are outdated, up to maxSurge extra devices are claimed
// (when spares are seen), and an outdated device is released once the pool has replicas available devices
// without it; otherwise outdated devices are re-provisioned in place, within maxUnavailable (see rollPick).
func decide(l limits, ms []*member) plan {
	var p plan
	bySlot := map[int]*member{}
	var losers []*member
	for _, m := range ms {
		if m.state == StateReleasing || m.state == StateRemediating {
			continue
		}
		if m.own.Slot < 0 {
			losers = append(losers, m)
			continue
		}
		prev, ok := bySlot[m.own.Slot]
		switch {
		case !ok:
			bySlot[m.own.Slot] = m
		case slotWinner(prev, m) == m:
			bySlot[m.own.Slot] = m
			losers = append(losers, prev)
		default:
			losers = append(losers, m)
		}
	}
	for _, m := range bySlot {
		p.keep = append(p.keep, m)
	}
	slices.SortFunc(p.keep, func(a, b *member) int { return cmp.Compare(a.own.Slot, b.own.Slot) })
	p.release = releaseOrder(losers)
	old := 0
	for _, m := range p.keep {
		if outdated(m) {
			old++
		}
	}
	surge := 0
	if l.spares || len(p.keep) > l.replicas {
		surge = min(l.maxSurge, old)
	}
	if excess := len(p.keep) - (l.replicas + surge); excess > 0 {
		p.drop(releaseOrder(p.keep)[:excess])
	}
	if surge > 0 {
		p.drop(surplus(l.replicas, p.keep))
	}
	target := l.replicas + surge
	for slot := 0; len(p.keep)+len(p.slots) < target; slot++ {
		if _, used := bySlot[slot]; !used {
			p.slots = append(p.slots, slot)
		}
	}
	if surge == 0 {
		p.roll = rollPick(l.replicas, l.maxUnavailable, p.keep)
	}
	return p
}

// drop moves ms from keep to release.
func (p *plan) drop(ms []*member) {
	p.release = append(p.release, ms...)
	p.keep = slices.DeleteFunc(p.keep, func(m *member) bool { return slices.Contains(ms, m) })
}

// outdated reports whether m holds, or is being reloaded with, an earlier spec than the pool's.
func outdated(m *member) bool { return m.state != StateClaimed && !m.current }

// surplus returns the outdated devices a surge lets go: those beyond replicas, in release order, each only while
// the pool keeps replicas available devices without it.
func surplus(replicas int, keep []*member) []*member {
	avail := 0
	for _, m := range keep {
		if available(m.state) && !m.stopping {
			avail++
		}
	}
	var out []*member
	extra := len(keep) - replicas
	for _, m := range releaseOrder(keep) {
		if extra == 0 {
			break
		}
		if !outdated(m) {
			continue
		}
		up := available(m.state) && !m.stopping
		if up && avail <= replicas {
			continue
		}
		if up {
			avail--
		}
		out = append(out, m)
		extra--
	}
	return out
}

// rollPick chooses the outdated devices to re-provision now so that the pool never has more than maxUnavailable
// of its replicas down: outdated devices that are powered off (or being shut down for a roll) cost nothing more
// and go first; then running ones, as long as fewer than replicas − maxUnavailable devices would be left
// available. A device counts as down from the moment it is asked to shut down, and missing devices count as
// down, so the next device waits until the previous one is ready again. Running devices go from the highest slot
// down, as a StatefulSet rolls.
func rollPick(replicas, maxUnavailable int, keep []*member) []*member {
	var out, running []*member
	avail := 0
	for _, m := range keep {
		switch {
		case !outdated(m) && available(m.state):
			avail++
		case m.state == StateOff && !m.current, m.state == StateOutdated && m.stopping:
			out = append(out, m)
		case m.state == StateOutdated:
			avail++
			running = append(running, m)
		}
	}
	slices.SortFunc(running, func(a, b *member) int { return cmp.Compare(b.own.Slot, a.own.Slot) })
	budget := maxUnavailable - (replicas - avail)
	for _, m := range running {
		if budget <= 0 {
			break
		}
		out = append(out, m)
		budget--
	}
	return out
}

// admit splits the devices found stuck or failed into those remediation may take out now and those it holds
// back: at most maxUnhealthy devices of a pool are in remediation at once, counting the inRemediation already
// in it. Lower slots go first, so that every replica holds back the same devices.
func admit(maxUnhealthy, inRemediation int, stuck []*member) (take, held []*member) {
	ordered := slices.Clone(stuck)
	slices.SortFunc(ordered, func(a, b *member) int {
		return cmp.Or(cmp.Compare(slotOrder(a.own.Slot), slotOrder(b.own.Slot)), cmp.Compare(a.dev.ID, b.dev.ID))
	})
	room := max(maxUnhealthy-inRemediation, 0)
	room = min(room, len(ordered))
	return ordered[:room], ordered[room:]
}

// stuckWhy returns the value of the permanent-error tag for a device whose reload has failed or run past its
// timeout, judged from a fresh status: "reloading-since-<start>" for a stuck reload, "reload-failed-<start>" for a
// failed one. installingSince is when the installer was first seen running (zero: unknown).
func stuckWhy(m *member, now time.Time, offTimeout, onTimeout time.Duration, installingSince time.Time) (string, bool) {
	st := m.status
	if st == nil || m.own.ReloadAt.IsZero() {
		return "", false
	}
	start := m.own.ReloadAt.UTC().Format(time.RFC3339)
	switch {
	case m.failed:
		return "reload-failed-" + start, true
	case !st.Reloading || m.quiet: // a quiet read is a reload not yet seen to start, or ended: neither is stuck
		return "", false
	case st.Power != hvclient.PowerOn && now.Sub(m.own.ReloadAt) > offTimeout:
		return "reloading-since-" + start, true
	case st.Power == hvclient.PowerOn:
		// Not knowing when the installer booted, assume it booted as late as it could have without being
		// stuck: the device is then never marked early.
		if installingSince.IsZero() {
			installingSince = m.own.ReloadAt.Add(offTimeout)
		}
		if now.Sub(installingSince) > onTimeout {
			return "reloading-since-" + start, true
		}
	}
	return "", false
}
