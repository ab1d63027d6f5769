package hivelocity

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// The default settle covers what the real API was seen to do and a margin: answers of up to 1.2 s (the check
// must come back, and the write go out, within the gap; the write's round trip within its budget) and tag writes
// that show up to 1.5 s late.
func TestDefaultClaimBudgetCoversSlowAnswersAndLateTags(t *testing.T) {
	const answer, visible = 1200 * time.Millisecond, 1500 * time.Millisecond
	b := budgetOf(DefaultSettings().ClaimSettle)
	require.GreaterOrEqual(t, b.Gap, answer, "a check answered in %s must leave its write time to go out", answer)
	require.True(t, b.Trusted(answer), "a write answered in %s is trusted", answer)
	require.GreaterOrEqual(t, b.Delay(), visible)
	require.Equal(t, b.Settle, 2*b.Delay()+b.Gap+b.Write, "the proof's inequality, with no slack lost")
	// 5 s would not do: either the answers or the visibility delay would have to give.
	five := budgetOf(5 * time.Second)
	require.False(t, five.Gap >= answer && five.Delay() >= visible)
}

func TestClaimBudget(t *testing.T) {
	tests := []struct {
		settle             time.Duration
		gap, write, delay  time.Duration
		trusted, untrusted time.Duration
	}{
		{settle: 6 * time.Second, gap: 1200 * time.Millisecond, write: 1200 * time.Millisecond, delay: 1800 * time.Millisecond,
			trusted: 1200 * time.Millisecond, untrusted: 1201 * time.Millisecond},
		{settle: 5 * time.Second, gap: time.Second, write: time.Second, delay: 1500 * time.Millisecond,
			trusted: time.Second, untrusted: 1100 * time.Millisecond},
		{settle: 200 * time.Millisecond, gap: 40 * time.Millisecond, write: 40 * time.Millisecond, delay: 60 * time.Millisecond,
			trusted: 0, untrusted: 41 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.settle.String(), func(t *testing.T) {
			b := budgetOf(tt.settle)
			require.Equal(t, tt.gap, b.Gap)
			require.Equal(t, tt.write, b.Write)
			require.Equal(t, tt.delay, b.Delay())
			require.True(t, b.Trusted(tt.trusted))
			require.False(t, b.Trusted(tt.untrusted))
		})
	}
}

// A claimer's reload goes out within its lease; nobody takes the claim over before that reload shows.
func TestLeaseComesBeforeTakeover(t *testing.T) {
	for _, s := range []Settings{DefaultSettings(), {ClaimSettle: 200 * time.Millisecond, ShutdownTimeout: 3 * time.Second, PollInterval: 150 * time.Millisecond}} {
		b := budgetOf(s.ClaimSettle)
		// The lease covers the claim settling and a device that ignores its shutdown until the reload is forced.
		require.Greater(t, s.lease(), s.ClaimSettle+b.Gap+b.Write+s.ShutdownTimeout+s.PollInterval)
		// A reload sent at the lease's end is answered within reloadTimeout and shows δ later.
		require.GreaterOrEqual(t, s.AdoptAfter(), s.lease()+s.reloadTimeout()+b.Delay())
	}
}

// A reload's end is believed only when it is stable.
func TestReloadOver(t *testing.T) {
	t0 := epoch
	gap := 30 * time.Second
	newOS := notes{osBefore: "Ubuntu 20.x", osTarget: "Ubuntu 22.x"}
	sameOS := notes{osBefore: "Ubuntu 22.x", osTarget: "Ubuntu 22.x"}
	tests := []struct {
		name      string
		st        hvclient.Status
		n         notes
		listOS    string
		now       time.Time
		wantOver  bool
		wantQuiet time.Time
	}{
		{name: "reloading", st: hvclient.Status{Reloading: true, Power: hvclient.PowerOn}, n: newOS, listOS: "Ubuntu 22.x", now: t0},
		{name: "reloading resets an earlier quiet read", st: hvclient.Status{Reloading: true}, n: notes{quietSince: t0}, now: t0.Add(time.Minute)},
		{name: "one read: on, not reloading, the new OS installed", st: hvclient.Status{Power: hvclient.PowerOn}, n: newOS, listOS: "Ubuntu 22.x",
			now: t0, wantOver: true, wantQuiet: t0},
		{name: "first read, not yet started (the list shows the old OS)", st: hvclient.Status{Power: hvclient.PowerOn}, n: newOS, listOS: "Ubuntu 20.x",
			now: t0, wantQuiet: t0},
		{name: "first read, no list taken since the reload", st: hvclient.Status{Power: hvclient.PowerOn}, n: newOS, now: t0, wantQuiet: t0},
		{name: "first read, same OS as before proves nothing", st: hvclient.Status{Power: hvclient.PowerOn}, n: sameOS, listOS: "Ubuntu 22.x",
			now: t0, wantQuiet: t0},
		{name: "first read, powered off", st: hvclient.Status{Power: hvclient.PowerOff}, n: newOS, listOS: "Ubuntu 22.x", now: t0, wantQuiet: t0},
		{name: "second read too soon", st: hvclient.Status{Power: hvclient.PowerOn}, n: notes{quietSince: t0}, now: t0.Add(gap - time.Second),
			wantQuiet: t0},
		{name: "second read a gap later agrees", st: hvclient.Status{Power: hvclient.PowerOn}, n: notes{quietSince: t0}, now: t0.Add(gap),
			wantOver: true, wantQuiet: t0},
		{name: "ours, one read sent a gap after the reload was answered", st: hvclient.Status{Power: hvclient.PowerOn},
			n: notes{startedAt: t0, osBefore: "Ubuntu 22.x", osTarget: "Ubuntu 22.x"}, now: t0.Add(gap), wantOver: true, wantQuiet: t0.Add(gap)},
		{name: "ours, one read sent less than a gap after the reload was answered", st: hvclient.Status{Power: hvclient.PowerOn},
			n: notes{startedAt: t0, osBefore: "Ubuntu 22.x", osTarget: "Ubuntu 22.x"}, now: t0.Add(gap - time.Second), wantQuiet: t0.Add(gap - time.Second)},
		{name: "a failed reload, two reads", st: hvclient.Status{Power: hvclient.PowerOff, SPSStatus: hvclient.ProvisioningFailed},
			n: notes{quietSince: t0}, now: t0.Add(gap), wantOver: true, wantQuiet: t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over, quiet := reloadOver(tt.st, tt.n, tt.listOS, tt.now, tt.now, gap)
			require.Equal(t, tt.wantOver, over)
			require.Equal(t, tt.wantQuiet, quiet)
		})
	}
}

// The second read of the stable-end rule is due a gap after the first.
func TestStatusDueAfterAQuietRead(t *testing.T) {
	own := Ownership{ReloadAt: epoch}
	n := notes{reloadAt: epoch, statuses: 1, lastStatus: epoch.Add(time.Minute), quietSince: epoch.Add(time.Minute)}
	due, watch := statusDue(n, own, hvclient.Device{Power: hvclient.PowerOn}, 10*time.Minute, 40*time.Minute, 3*time.Minute, 15*time.Second)
	require.True(t, watch)
	require.Equal(t, epoch.Add(time.Minute+stableGap(15*time.Second)), due)

	// This replica's own reload: a gap after its answer, when one quiet read proves the end.
	n.startedAt = epoch.Add(10 * time.Second)
	due, watch = statusDue(n, own, hvclient.Device{Power: hvclient.PowerOn}, 10*time.Minute, 40*time.Minute, 3*time.Minute, 15*time.Second)
	require.True(t, watch)
	require.Equal(t, epoch.Add(10*time.Second+stableGap(15*time.Second)), due)
}

func TestChangedSince(t *testing.T) {
	claim := Claim{At: epoch, Nonce: "ours"}
	acted := Ownership{Cluster: cluster, NodePool: poolA, Slot: 1, Claim: claim}
	reloaded := acted
	reloaded.Spec, reloaded.ReloadAt = "abc", epoch.Add(time.Minute)
	tests := []struct {
		name      string
		acted     Ownership
		reloading bool
		st        hvclient.Status
		want      string
	}{
		{name: "unchanged", acted: acted, st: hvclient.Status{Tags: withOwnership([]string{TagUseAllow}, acted)}},
		{name: "operator tags changed", acted: acted, st: hvclient.Status{Tags: withOwnership([]string{TagUseAllow, "caphvlabel:x=y"}, acted)}},
		{name: "untagged", acted: acted, st: hvclient.Status{Tags: []string{TagUseAllow}}, want: "changed owner"},
		{name: "another pool", acted: acted, st: hvclient.Status{Tags: withOwnership(nil, Ownership{Cluster: cluster, NodePool: "other", Slot: 1, Claim: claim})},
			want: "changed owner"},
		{name: "claimed again", acted: acted, st: hvclient.Status{Tags: withOwnership(nil, Ownership{Cluster: cluster, NodePool: poolA, Slot: 1,
			Claim: Claim{At: epoch.Add(time.Second), Nonce: "theirs"}})}, want: "was claimed again"},
		{name: "reloaded since", acted: acted, st: hvclient.Status{Tags: withOwnership(nil, reloaded)}, want: "was reloaded since"},
		{name: "started reloading", acted: acted, st: hvclient.Status{Reloading: true, Tags: withOwnership(nil, acted)}, want: "started reloading"},
		{name: "reloading as the pass saw", acted: acted, reloading: true, st: hvclient.Status{Reloading: true, Tags: withOwnership(nil, acted)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, changedSince(tt.acted, tt.reloading, tt.st))
		})
	}
}

func TestRebase(t *testing.T) {
	tests := []struct {
		name              string
		base, want, fresh []string
		got               []string
	}{
		{name: "nothing changed meanwhile", base: []string{"a", "hyperfleet-x=1"}, want: []string{"a", "caphv-permanent-error=w"},
			fresh: []string{"a", "hyperfleet-x=1"}, got: []string{"a", "caphv-permanent-error=w"}},
		{name: "an operator's label added meanwhile stays", base: []string{"a", "hyperfleet-x=1"}, want: []string{"a"},
			fresh: []string{"a", "hyperfleet-x=1", "b"}, got: []string{"a", "b"}},
		{name: "a tag removed meanwhile stays removed", base: []string{"a", "b", "hyperfleet-x=1"}, want: []string{"a", "b"},
			fresh: []string{"a", "hyperfleet-x=1"}, got: []string{"a"}},
		{name: "no duplicates", base: []string{"a"}, want: []string{"a", "c"}, fresh: []string{"a", "c"}, got: []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.got, rebase(tt.base, tt.want, tt.fresh))
		})
	}
}

// Immediately before a reload, and before any tag write, the device is read afresh: a change since the pass
// looked (another claim, another owner, a reload already started) stops the call, whatever Hivelocity would
// accept.
func TestReloadAndWritesStopWhenTheDeviceChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(tb testing.TB, other *hvclient.Client, tags []string)
	}{
		{name: "claimed again", change: func(tb testing.TB, other *hvclient.Client, tags []string) {
			tb.Helper()
			own, _ := ownershipOf(tags)
			own.Claim = Claim{At: own.Claim.At.Add(time.Millisecond), Nonce: "theirs"}
			require.NoError(tb, other.SetTags(context.Background(), 1000, withOwnership(tags, own)))
		}},
		{name: "untagged", change: func(tb testing.TB, other *hvclient.Client, tags []string) {
			tb.Helper()
			require.NoError(tb, other.SetTags(context.Background(), 1000, operatorTags(tags)))
		}},
		{name: "reloading", change: func(tb testing.TB, other *hvclient.Client, tags []string) {
			tb.Helper()
			require.NoError(tb, other.Reload(context.Background(), 1000, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "x.example.com",
				Tags: tags, SkipPowerCheck: true}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newClaimEnv(t, 1)
			r := e.replica(t)
			p := claimPass(r, poolA)
			won := p.claim(context.Background(), []claimTarget{{slot: 0, dev: hvclient.Device{ID: 1000}}})
			require.Len(t, won, 1)
			m := won[0]
			other, err := hvclient.New(hvclient.Config{URL: e.url, APIKeyFile: e.key, Timeout: 5 * time.Second})
			require.NoError(t, err)
			tt.change(t, other, m.dev.Tags)
			time.Sleep(2 * tagDelay) // the change shows
			e.sim.ResetRequests()

			p.strip(context.Background(), m)
			require.ErrorIs(t, p.write(context.Background(), m, permanentError(m.dev.Tags, "test")), errDeviceChanged)
			own := m.own
			own.Spec, own.ReloadAt = spec, epoch
			p.reload(context.Background(), m, own, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "w-0.example.com"}, StateReloading)
			reqs := e.sim.Requests()
			require.Len(t, reqs, 3, "one fresh read each for the strip, the write and the reload")
			for _, req := range reqs {
				require.Equal(t, hivelocitysim.OpGetDeviceDump, req.Op, "request %d after the device changed", req.Seq)
			}
		})
	}
}
