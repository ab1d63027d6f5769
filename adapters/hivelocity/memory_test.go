package hivelocity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

func TestStatusDue(t *testing.T) {
	const off, on, interval, minGap = 10 * time.Minute, 40 * time.Minute, 3 * time.Minute, 15 * time.Second
	at := epoch.Add
	own := Ownership{NodePool: poolA, Slot: 0, Spec: spec, ReloadAt: epoch}
	device := func(power, os string) hvclient.Device { return hvclient.Device{ID: 1, Power: power, OSName: os} }
	ours := notes{reloadAt: epoch, startedAt: epoch, osBefore: "Ubuntu 20.x", osTarget: "Ubuntu 22.x"}
	with := func(n notes, f func(*notes)) notes { f(&n); return n }
	tests := []struct {
		name      string
		own       Ownership
		n         notes
		dev       hvclient.Device
		want      time.Time // zero: now
		wantWatch bool
	}{
		{name: "only claimed: nothing to watch", own: Ownership{NodePool: poolA, Slot: 0}, n: notes{}, dev: device(hvclient.PowerOn, "")},
		{name: "a reload this replica knows nothing of: now", own: own, n: notes{}, dev: device(hvclient.PowerOff, "Ubuntu 20.x"), wantWatch: true},
		{name: "notes of an earlier reload: now", own: own, n: with(ours, func(n *notes) { n.reloadAt = at(-time.Hour) }),
			dev: device(hvclient.PowerOff, ""), wantWatch: true},
		{name: "known to have ended: never", own: own, n: with(ours, func(n *notes) { n.ended = true; n.statuses = 1 }), dev: device(hvclient.PowerOn, "")},
		{name: "the last report saw it end: never", own: own, n: notes{reloadAt: epoch, ended: true}, dev: device(hvclient.PowerOn, "")},
		{name: "ours, powered off: at the powered-off timeout", own: own, n: ours, dev: device(hvclient.PowerOff, "Ubuntu 20.x"), want: at(off), wantWatch: true},
		{name: "powered off past the timeout, looked at since: every interval", own: own,
			n: with(ours, func(n *notes) { n.statuses, n.lastStatus = 1, at(11*time.Minute) }), dev: device(hvclient.PowerOff, ""),
			want: at(14 * time.Minute), wantWatch: true},
		{name: "installing a new OS: three intervals after it began, the list will tell sooner", own: own,
			n: with(ours, func(n *notes) { n.installingSince = at(2 * time.Minute) }), dev: device(hvclient.PowerOn, "Ubuntu 20.x"),
			want: at(11 * time.Minute), wantWatch: true},
		{name: "installing the same OS: an interval after it began", own: own,
			n:   with(ours, func(n *notes) { n.installingSince, n.osBefore = at(2*time.Minute), "Ubuntu 22.x" }),
			dev: device(hvclient.PowerOn, "Ubuntu 22.x"), want: at(5 * time.Minute), wantWatch: true},
		{name: "installing, looked at twice: the interval has doubled twice", own: own,
			n: with(ours, func(n *notes) {
				n.installingSince, n.statuses, n.lastStatus, n.osBefore = at(2*time.Minute), 2, at(8*time.Minute), "Ubuntu 22.x"
			}),
			dev: device(hvclient.PowerOn, "Ubuntu 20.x"), want: at(20 * time.Minute), wantWatch: true},
		{name: "installing a long time: at most eight intervals apart, and at the timeout", own: own,
			n:   with(ours, func(n *notes) { n.installingSince, n.statuses, n.lastStatus = at(2*time.Minute), 6, at(20*time.Minute) }),
			dev: device(hvclient.PowerOn, "Ubuntu 20.x"), want: at(42 * time.Minute), wantWatch: true},
		{name: "the list shows the new OS: at once (after the least gap)", own: own,
			n:   with(ours, func(n *notes) { n.installingSince, n.statuses, n.lastStatus = at(2*time.Minute), 1, at(5*time.Minute) }),
			dev: device(hvclient.PowerOn, "Ubuntu 22.x"), want: at(5*time.Minute + minGap), wantWatch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, watch := statusDue(tt.n, tt.own, tt.dev, off, on, interval, minGap)
			require.Equal(t, tt.wantWatch, watch)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestTrackerTags(t *testing.T) {
	tr := newTracker()
	d := hvclient.Device{ID: 1, Tags: []string{"listed"}}
	const settle = 5 * time.Second
	require.Equal(t, []string{"listed"}, tr.tagsOf(d, epoch), "nothing noted: the list's")

	tr.wrote(1, []string{"written"}, epoch, settle)
	require.Equal(t, []string{"written"}, tr.tagsOf(d, epoch.Add(time.Second)), "a list taken before the write can show is older")
	require.Equal(t, []string{"listed"}, tr.tagsOf(d, epoch.Add(settle+time.Second)), "a list taken after it shows is newer")

	tr.read(1, []string{"read too early"}, epoch.Add(time.Second))
	require.Equal(t, []string{"written"}, tr.tagsOf(d, epoch.Add(2*time.Second)), "a read that may not show the write does not replace it")
	tr.read(1, []string{"read"}, epoch.Add(6*time.Second))
	require.Equal(t, []string{"read"}, tr.tagsOf(d, epoch.Add(5*time.Second)))

	tr.forget(epoch.Add(time.Hour))
	require.Equal(t, notes{}, tr.get(1))
}
