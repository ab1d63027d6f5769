package hivelocity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

const spec = "0123456789ab"

func TestClassify(t *testing.T) {
	claimed := Ownership{NodePool: poolA, Slot: 0, Claim: Claim{At: epoch, Nonce: "n"}}
	reloaded := claimed
	reloaded.Spec, reloaded.ReloadAt = spec, epoch
	outdated := reloaded
	outdated.Spec = "fedcba987654"
	releasing := Ownership{NodePool: poolA, Slot: -1, ReloadAt: epoch, ReleaseAt: epoch}
	status := func(power string, reloading bool, sps string) *hvclient.Status {
		return &hvclient.Status{Power: power, Reloading: reloading, SPSStatus: sps}
	}
	tests := []struct {
		name       string
		own        Ownership
		ob         observation
		want       State
		wantEnded  bool
		wantFailed bool
	}{
		{name: "claimed, on", own: claimed, ob: observation{power: hvclient.PowerOn}, want: StateClaimed},
		{name: "claimed, off", own: claimed, ob: observation{power: hvclient.PowerOff}, want: StateClaimed},
		{name: "reloaded, off, nothing known: still reloading", own: reloaded, ob: observation{power: hvclient.PowerOff}, want: StateReloading},
		{name: "reloaded, on, nothing known: installing", own: reloaded, ob: observation{power: hvclient.PowerOn}, want: StateInstalling},
		{name: "known to have ended, on", own: reloaded, ob: observation{power: hvclient.PowerOn, done: true}, want: StateReady, wantEnded: true},
		{name: "known to have ended, off", own: reloaded, ob: observation{power: hvclient.PowerOff, done: true}, want: StateOff, wantEnded: true},
		{name: "an earlier spec, on", own: outdated, ob: observation{power: hvclient.PowerOn, done: true}, want: StateOutdated, wantEnded: true},
		{name: "an earlier spec, off", own: outdated, ob: observation{power: hvclient.PowerOff, done: true}, want: StateOff, wantEnded: true},
		{name: "status: reloading, off", own: reloaded, ob: observation{power: hvclient.PowerOn, status: status(hvclient.PowerOff, true, "RELOADING")},
			want: StateReloading},
		{name: "status: installing", own: reloaded, ob: observation{power: hvclient.PowerOff, status: status(hvclient.PowerOn, true, "RELOADING")},
			want: StateInstalling},
		{name: "status: done beats an old list", own: reloaded, ob: observation{power: hvclient.PowerOff, status: status(hvclient.PowerOn, false, "IN_USE")},
			want: StateReady, wantEnded: true},
		{name: "status: failed", own: reloaded, ob: observation{status: status(hvclient.PowerOff, false, hvclient.ProvisioningFailed)},
			want: StateFailed, wantEnded: true, wantFailed: true},
		{name: "status: reloading beats notes that say done", own: reloaded, ob: observation{done: true, status: status(hvclient.PowerOff, true, "RELOADING")},
			want: StateReloading},
		{name: "releasing, wiping", own: releasing, ob: observation{status: status(hvclient.PowerOn, true, "RELOADING")}, want: StateReleasing},
		{name: "releasing, wiped", own: releasing, ob: observation{status: status(hvclient.PowerOn, false, "IN_USE")}, want: StateReleasing, wantEnded: true},
		{name: "releasing, the wipe failed", own: releasing, ob: observation{status: status(hvclient.PowerOff, false, hvclient.ProvisioningFailed)},
			want: StateReleasing, wantEnded: true, wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ended, failed := classify(tt.own, spec, tt.ob)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantEnded, ended)
			require.Equal(t, tt.wantFailed, failed)
		})
	}
}

// dev returns a member in state with a slot, a claim made claimAt seconds after epoch, and the pool's spec
// unless state says otherwise.
func dev(id int32, slot int, state State, claimAt int) *member {
	m := &member{dev: hvclient.Device{ID: id}, state: state, current: state != StateOutdated, settled: true,
		own: Ownership{NodePool: poolA, Slot: slot, Claim: Claim{At: epoch.Add(time.Duration(claimAt) * time.Second), Nonce: "n"}}}
	if state != StateClaimed {
		m.own.Spec = spec
	}
	return m
}

func ids(ms []*member) []int32 {
	out := []int32{}
	for _, m := range ms {
		out = append(out, m.dev.ID)
	}
	return out
}

func TestReleaseOrder(t *testing.T) {
	tests := []struct {
		name string
		ms   []*member
		want []int32
	}{
		{
			name: "claimed, provisioning, failed, off, then ready",
			ms: []*member{dev(1, 0, StateReady, 0), dev(2, 1, StateOff, 0), dev(3, 2, StateFailed, 0), dev(4, 3, StateInstalling, 0),
				dev(5, 4, StateReloading, 0), dev(6, 5, StateClaimed, 0)},
			want: []int32{6, 5, 4, 3, 2, 1},
		},
		{
			name: "ready ones by the highest slot",
			ms:   []*member{dev(1, 0, StateReady, 0), dev(2, 4, StateReady, 0), dev(3, 2, StateReady, 0)},
			want: []int32{2, 3, 1},
		},
		{
			name: "outdated before current",
			ms:   []*member{dev(1, 5, StateReady, 0), dev(2, 1, StateOutdated, 0), dev(3, 2, StateReady, 0)},
			want: []int32{2, 1, 3},
		},
		{
			name: "a shared slot: the highest device id first",
			ms:   []*member{dev(7, 1, StateReady, 0), dev(9, 1, StateReady, 0)},
			want: []int32{9, 7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ids(releaseOrder(tt.ms)))
		})
	}
}

func TestDecide(t *testing.T) {
	one := func(replicas int) limits { return limits{replicas: replicas, maxUnavailable: 1, spares: true} }
	old := func(id int32, slot int, state State) *member {
		m := dev(id, slot, state, 0)
		m.current = false
		return m
	}
	tests := []struct {
		name        string
		l           limits
		ms          []*member
		wantKeep    []int32
		wantRelease []int32
		wantSlots   []int
		wantRoll    []int32
	}{
		{name: "an empty pool claims the lowest slots", l: one(3), wantKeep: []int32{}, wantRelease: []int32{}, wantSlots: []int{0, 1, 2}, wantRoll: []int32{}},
		{
			name: "gaps are filled from the lowest slot", l: one(4),
			ms:       []*member{dev(1, 1, StateReady, 0), dev(2, 3, StateReady, 0)},
			wantKeep: []int32{1, 2}, wantRelease: []int32{}, wantSlots: []int{0, 2}, wantRoll: []int32{},
		},
		{
			name: "scale down releases in release order", l: one(2),
			ms:       []*member{dev(1, 0, StateReady, 0), dev(2, 1, StateReady, 0), dev(3, 2, StateReady, 0), dev(4, 3, StateInstalling, 0)},
			wantKeep: []int32{1, 2}, wantRelease: []int32{4, 3}, wantRoll: []int32{},
		},
		{
			name: "scale to zero", l: one(0),
			ms:       []*member{dev(1, 0, StateReady, 0), dev(2, 1, StateClaimed, 0)},
			wantKeep: []int32{}, wantRelease: []int32{2, 1}, wantRoll: []int32{},
		},
		{
			name: "a shared slot goes to the earlier claim", l: one(2),
			ms:       []*member{dev(1, 0, StateReady, 0), dev(2, 1, StateClaimed, 5), dev(3, 1, StateClaimed, 3)},
			wantKeep: []int32{1, 3}, wantRelease: []int32{2}, wantRoll: []int32{},
		},
		{
			name: "a shared slot goes to the reloaded device, however late its claim", l: one(1),
			ms:       []*member{dev(2, 0, StateClaimed, 1), dev(3, 0, StateReloading, 9)},
			wantKeep: []int32{3}, wantRelease: []int32{2}, wantRoll: []int32{},
		},
		{
			name: "a device without a slot is released", l: one(1),
			ms:       []*member{dev(1, 0, StateReady, 0), dev(2, -1, StateReady, 0)},
			wantKeep: []int32{1}, wantRelease: []int32{2}, wantRoll: []int32{},
		},
		{
			name: "devices being released neither count nor block their slots", l: one(2),
			ms:       []*member{dev(1, 0, StateReady, 0), {dev: hvclient.Device{ID: 2}, state: StateReleasing, own: Ownership{Slot: -1}}},
			wantKeep: []int32{1}, wantRelease: []int32{}, wantSlots: []int{1}, wantRoll: []int32{},
		},
		{
			name: "a device being taken out frees its slot for a replacement", l: one(2),
			ms:       []*member{dev(1, 0, StateReady, 0), {dev: hvclient.Device{ID: 2}, state: StateRemediating, own: Ownership{Slot: 1, Remediate: "x"}}},
			wantKeep: []int32{1}, wantRelease: []int32{}, wantSlots: []int{1}, wantRoll: []int32{},
		},
		{
			name: "a full pool rolls its highest outdated slot", l: one(3),
			ms:       []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateReady, 0), dev(3, 2, StateOutdated, 0)},
			wantKeep: []int32{1, 2, 3}, wantRelease: []int32{}, wantRoll: []int32{3},
		},
		{
			name: "max_unavailable 2 rolls two at once", l: limits{replicas: 5, maxUnavailable: 2},
			ms: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateOutdated, 0), dev(3, 2, StateOutdated, 0),
				dev(4, 3, StateOutdated, 0), dev(5, 4, StateOutdated, 0)},
			wantKeep: []int32{1, 2, 3, 4, 5}, wantRelease: []int32{}, wantRoll: []int32{5, 4},
		},
		{
			name: "max_unavailable 2 with one down rolls one more", l: limits{replicas: 5, maxUnavailable: 2},
			ms: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateOutdated, 0), dev(3, 2, StateOutdated, 0),
				dev(4, 3, StateOutdated, 0), dev(5, 4, StateReloading, 0)},
			wantKeep: []int32{1, 2, 3, 4, 5}, wantRelease: []int32{}, wantRoll: []int32{4},
		},
		{
			name: "surge: claim an extra device first, roll nothing in place", l: limits{replicas: 3, maxUnavailable: 1, maxSurge: 1, spares: true},
			ms:       []*member{old(1, 0, StateOutdated), old(2, 1, StateOutdated), old(3, 2, StateOutdated)},
			wantKeep: []int32{1, 2, 3}, wantRelease: []int32{}, wantSlots: []int{3}, wantRoll: []int32{},
		},
		{
			name: "surge: the old devices stay while the new one provisions", l: limits{replicas: 3, maxUnavailable: 1, maxSurge: 1, spares: true},
			ms:       []*member{old(1, 0, StateOutdated), old(2, 1, StateOutdated), old(3, 2, StateOutdated), dev(4, 3, StateInstalling, 0)},
			wantKeep: []int32{1, 2, 3, 4}, wantRelease: []int32{}, wantRoll: []int32{},
		},
		{
			name: "surge: an old device goes once the new one is ready", l: limits{replicas: 3, maxUnavailable: 1, maxSurge: 1, spares: false},
			ms:       []*member{old(1, 0, StateOutdated), old(2, 1, StateOutdated), old(3, 2, StateOutdated), dev(4, 3, StateReady, 0)},
			wantKeep: []int32{1, 2, 4}, wantRelease: []int32{3}, wantSlots: []int{4}, wantRoll: []int32{},
		},
		{
			name: "surge without spares rolls in place", l: limits{replicas: 3, maxUnavailable: 1, maxSurge: 1},
			ms:       []*member{old(1, 0, StateOutdated), old(2, 1, StateOutdated), old(3, 2, StateOutdated)},
			wantKeep: []int32{1, 2, 3}, wantRelease: []int32{}, wantRoll: []int32{3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.l, tt.ms)
			require.Equal(t, tt.wantKeep, ids(got.keep), "keep")
			require.Equal(t, tt.wantRelease, ids(got.release), "release")
			require.Equal(t, tt.wantSlots, got.slots, "slots")
			require.Equal(t, tt.wantRoll, ids(got.roll), "roll")
		})
	}
}

func TestRollPick(t *testing.T) {
	offOutdated := dev(4, 3, StateOff, 0)
	offOutdated.current = false
	stopping := dev(5, 4, StateOutdated, 0)
	stopping.stopping = true
	tests := []struct {
		name           string
		replicas       int
		maxUnavailable int
		keep           []*member
		want           []int32
	}{
		{name: "nothing outdated", replicas: 2, maxUnavailable: 1, keep: []*member{dev(1, 0, StateReady, 0), dev(2, 1, StateReady, 0)}, want: []int32{}},
		{name: "one outdated, all ready", replicas: 2, maxUnavailable: 1, keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateReady, 0)}, want: []int32{1}},
		{name: "the highest slot first", replicas: 3, maxUnavailable: 1,
			keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 5, StateOutdated, 0), dev(3, 2, StateOutdated, 0)}, want: []int32{2}},
		{name: "one already down: wait", replicas: 3, maxUnavailable: 1,
			keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateReloading, 0), dev(3, 2, StateReady, 0)}, want: []int32{}},
		{name: "one already down, two allowed: one more", replicas: 3, maxUnavailable: 2,
			keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateReloading, 0), dev(3, 2, StateOutdated, 0)}, want: []int32{3}},
		{name: "a device short: wait", replicas: 3, maxUnavailable: 1, keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateReady, 0)}, want: []int32{}},
		{name: "a claimed device counts as down", replicas: 2, maxUnavailable: 1, keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateClaimed, 0)}, want: []int32{}},
		{name: "an outdated device that is off goes at once", replicas: 3, maxUnavailable: 1,
			keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateInstalling, 0), offOutdated}, want: []int32{4}},
		{name: "a device being shut down counts as down and carries on", replicas: 3, maxUnavailable: 1,
			keep: []*member{dev(1, 0, StateOutdated, 0), dev(2, 1, StateOutdated, 0), stopping}, want: []int32{5}},
		{name: "a current device that is off is booted, not rolled", replicas: 2, maxUnavailable: 1,
			keep: []*member{dev(1, 0, StateOff, 0), dev(2, 1, StateOutdated, 0)}, want: []int32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ids(rollPick(tt.replicas, tt.maxUnavailable, tt.keep)))
		})
	}
}

func TestAdmit(t *testing.T) {
	stuck := []*member{dev(3, 2, StateFailed, 0), dev(1, 0, StateFailed, 0), dev(2, 1, StateFailed, 0)}
	tests := []struct {
		name                   string
		maxUnhealthy, inRemedy int
		wantTake, wantHeld     []int32
	}{
		{name: "one at a time: the lowest slot", maxUnhealthy: 1, wantTake: []int32{1}, wantHeld: []int32{2, 3}},
		{name: "one already in remediation: none", maxUnhealthy: 1, inRemedy: 1, wantTake: []int32{}, wantHeld: []int32{1, 2, 3}},
		{name: "room for all", maxUnhealthy: 5, inRemedy: 1, wantTake: []int32{1, 2, 3}, wantHeld: []int32{}},
		{name: "0 remediates none", maxUnhealthy: 0, wantTake: []int32{}, wantHeld: []int32{1, 2, 3}},
		{name: "more in remediation than allowed (the spec changed)", maxUnhealthy: 1, inRemedy: 3, wantTake: []int32{}, wantHeld: []int32{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			take, held := admit(tt.maxUnhealthy, tt.inRemedy, stuck)
			require.Equal(t, tt.wantTake, ids(take), "take")
			require.Equal(t, tt.wantHeld, ids(held), "held")
		})
	}
}

func TestBackoff(t *testing.T) {
	const base, limit = 15 * time.Second, 30 * time.Minute
	var got []time.Duration
	for n := 1; n <= 10; n++ {
		got = append(got, backoff(n, base, limit))
	}
	require.Equal(t, []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute,
		8 * time.Minute, 16 * time.Minute, limit, limit, limit}, got)
}

func TestStuckWhy(t *testing.T) {
	const off, on = 10 * time.Minute, 40 * time.Minute
	at := epoch.Add
	reloading := func(power string, reloading bool, sps string) *member {
		m := dev(1, 0, StateReloading, 0)
		m.own.ReloadAt = epoch
		m.status = &hvclient.Status{Power: power, Reloading: reloading, SPSStatus: sps}
		m.failed = !reloading && sps == hvclient.ProvisioningFailed
		return m
	}
	since := "reloading-since-2026-03-04T10:00:00Z"
	tests := []struct {
		name       string
		m          *member
		now        time.Time
		installing time.Time
		want       string
	}{
		{name: "off within its timeout", m: reloading(hvclient.PowerOff, true, "RELOADING"), now: at(9 * time.Minute)},
		{name: "off past its timeout", m: reloading(hvclient.PowerOff, true, "RELOADING"), now: at(11 * time.Minute), want: since},
		{name: "installing within its timeout", m: reloading(hvclient.PowerOn, true, "RELOADING"), now: at(45 * time.Minute), installing: at(9 * time.Minute)},
		{name: "installing past its timeout", m: reloading(hvclient.PowerOn, true, "RELOADING"), now: at(50 * time.Minute), installing: at(9 * time.Minute), want: since},
		{name: "installing since an unknown time: assume as late as possible", m: reloading(hvclient.PowerOn, true, "RELOADING"), now: at(49 * time.Minute)},
		{name: "installing since an unknown time, past even that", m: reloading(hvclient.PowerOn, true, "RELOADING"), now: at(51 * time.Minute), want: since},
		{name: "done", m: reloading(hvclient.PowerOn, false, "IN_USE"), now: at(90 * time.Minute)},
		{name: "failed", m: reloading(hvclient.PowerOff, false, hvclient.ProvisioningFailed), now: at(3 * time.Minute), want: "reload-failed-2026-03-04T10:00:00Z"},
		{name: "a quiet read past the timeout (not started yet, or ended): not stuck", m: func() *member {
			m := reloading(hvclient.PowerOn, true, "IN_USE")
			m.quiet = true
			return m
		}(), now: at(90 * time.Minute)},
		{name: "no fresh status: no judgement", m: func() *member { m := reloading(hvclient.PowerOff, true, ""); m.status = nil; return m }(), now: at(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, stuck := stuckWhy(tt.m, tt.now, off, on, tt.installing)
			require.Equal(t, tt.want != "", stuck)
			require.Equal(t, tt.want, got)
		})
	}
}
