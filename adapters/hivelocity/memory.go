package hivelocity

import (
	"slices"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// notes is what a replica remembers of one device between reconciles. It only ever saves calls or waits:
// forgetting it (a restart, another replica taking over) costs a status GET or a repeated shutdown, never a wrong
// action, because the device's tags and the API's own refusals (a reload of a reloading device is a 409) decide.
type notes struct {
	// tags are the newest tags known: written by this replica or read fresh. A list taken before tagsAt may
	// not show them yet, since tag writes may take a while to show.
	tags   []string
	tagsAt time.Time
	// reloadAt names the reload the fields below are about (the device's reload tag, in whole seconds);
	// startedAt is when this replica sent it, if it did.
	reloadAt, startedAt time.Time
	// ended: the reload is over by the stable-end rule (see reloadOver).
	ended bool
	// quietSince is when a status first showed the reload not running, while that alone does not prove it
	// over: a reload may show as not started for a while after it was sent.
	quietSince time.Time
	// statuses counts the status GETs of that reload; lastStatus is the latest.
	statuses   int
	lastStatus time.Time
	// installingSince is when the installer was first seen running (powered on during the reload).
	installingSince time.Time
	// osBefore and osTarget are the device's OS when the reload started and the OS it installs: when they
	// differ, the list showing osTarget hints that the reload is over.
	osBefore, osTarget string
	// shutdownAt is when this replica asked the device to shut down, so that it forces the reload after
	// Settings.ShutdownTimeout if the device ignores it.
	shutdownAt time.Time
	// wonClaim is the nonce of a claim this replica made and won: it carries it on without waiting for the
	// claim to settle in other replicas' eyes.
	wonClaim string
	touched  time.Time
}

// tracker holds the notes of every device this replica works on.
type tracker struct {
	mu    sync.Mutex
	notes map[int32]*notes
}

func newTracker() *tracker { return &tracker{notes: map[int32]*notes{}} }

// get returns a copy of the device's notes (zero if none).
func (t *tracker) get(id int32) notes {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.notes[id]; n != nil {
		c := *n
		c.tags = slices.Clone(n.tags)
		return c
	}
	return notes{}
}

// update changes the device's notes under the lock.
func (t *tracker) update(id int32, now time.Time, fn func(n *notes)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.notes[id]
	if n == nil {
		n = &notes{}
		t.notes[id] = n
	}
	fn(n)
	n.touched = now
}

// wrote records tags this replica wrote at now: lists taken before now+settle may not show them.
func (t *tracker) wrote(id int32, tags []string, now time.Time, settle time.Duration) {
	t.update(id, now, func(n *notes) { n.tags, n.tagsAt = slices.Clone(tags), now.Add(settle) })
}

// read records tags read fresh at now, unless a write of this replica may not show in them yet.
func (t *tracker) read(id int32, tags []string, now time.Time) {
	t.update(id, now, func(n *notes) {
		if !now.Before(n.tagsAt) {
			n.tags, n.tagsAt = slices.Clone(tags), now
		}
	})
}

// tagsOf returns the device's tags as known: the list's, or newer ones this replica wrote or read.
func (t *tracker) tagsOf(d hvclient.Device, taken time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.notes[d.ID]; n != nil && n.tagsAt.After(taken) {
		return slices.Clone(n.tags)
	}
	return d.Tags
}

// forget drops the notes of devices untouched since before.
func (t *tracker) forget(before time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, n := range t.notes {
		if n.touched.Before(before) {
			delete(t.notes, id)
		}
	}
}

// reloadNotes returns n reset for the reload at reloadAt if n is about another one.
func reloadNotes(n *notes, reloadAt time.Time) {
	if !n.reloadAt.Equal(reloadAt) {
		*n = notes{tags: n.tags, tagsAt: n.tagsAt, shutdownAt: n.shutdownAt, wonClaim: n.wonClaim, reloadAt: reloadAt}
	}
}

// maxStatusBackoff caps how far apart the status GETs of one installing device get.
const maxStatusBackoff = 8

// statusDue returns when the status of a reloaded (or wiping) device is due, given what this replica noted of
// its reload; the zero time means now. A reload this replica knows nothing of is looked at at once; one known to
// have ended is never looked at again. Otherwise, powered off (the installer has not booted) the device is only
// looked at when its powered-off timeout passes; powered on, as soon as the list shows the OS being installed
// (when it differs from the one before), and else after interval (three times that when the list will show the
// new OS), doubling up to eight times interval, and at the powered-on timeout at the latest.
func statusDue(n notes, own Ownership, dev hvclient.Device, offTimeout, onTimeout, interval, minGap time.Duration) (time.Time, bool) {
	switch {
	case own.ReloadAt.IsZero():
		return time.Time{}, false
	case !n.reloadAt.Equal(own.ReloadAt):
		return time.Time{}, true
	case n.ended:
		return time.Time{}, false
	case !n.quietSince.IsZero(): // the read that proves the end (reloadOver)
		return quietDue(n, stableGap(minGap)), true
	case n.statuses == 0 && n.osTarget == "": // another replica's, or an earlier run's, reload
		return time.Time{}, true
	}
	if dev.Power != hvclient.PowerOn || n.installingSince.IsZero() {
		deadline := own.ReloadAt.Add(offTimeout)
		if n.lastStatus.Before(deadline) {
			return deadline, true
		}
		return n.lastStatus.Add(interval), true
	}
	last := n.lastStatus
	if last.Before(n.installingSince) {
		last = n.installingSince
	}
	informative := n.osTarget != "" && n.osBefore != n.osTarget
	if informative && dev.OSName == n.osTarget {
		return n.lastStatus.Add(minGap), true
	}
	// When the list will show the new OS, the timed looks only guard against a list that does not: they start
	// later.
	base := interval
	if informative {
		base = 3 * interval
	}
	gap := min(base<<min(n.statuses, maxStatusBackoff/2), maxStatusBackoff*interval)
	due := last.Add(gap)
	if deadline := n.installingSince.Add(onTimeout); deadline.Before(due) && n.lastStatus.Before(deadline) {
		due = deadline
	}
	return due, true
}

// stableGap is how far apart two status reads that both show a reload not running must be for its end to be
// believed: twice the provisioning poll interval (30 s by default), more than a reload takes to show as started
// after it was sent (an assumption about the real API, see README.md).
func stableGap(pollInterval time.Duration) time.Duration { return 2 * pollInterval }

// quietDue is when the read that proves a quiet reload over is due: gap after the first quiet read, or gap after
// this replica's reload was answered if that is sooner (see reloadOver).
func quietDue(n notes, gap time.Duration) time.Time {
	due := n.quietSince.Add(gap)
	if !n.startedAt.IsZero() && n.startedAt.Add(gap).Before(due) {
		due = n.startedAt.Add(gap)
	}
	return due
}

// reloadOver applies the stable-end rule to a status read sent at sent and answered at now: a reload is over when
// one read shows the device on, not reloading and with the OS the reload installs, if that differs from the OS
// before (listOS is what a device list taken after the reload was sent names, "" if none); or when a read sent at
// least gap after this replica's reload was answered (n.startedAt) shows it not reloading, since by then a reload
// shows as started; or, for a reload this replica did not send, when two reads at least gap apart both show it
// not reloading. quiet is when the first read that showed it not reloading was (zero while it reloads).
func reloadOver(st hvclient.Status, n notes, listOS string, sent, now time.Time, gap time.Duration) (over bool, quiet time.Time) {
	if st.Reloading {
		return false, time.Time{}
	}
	if st.Power == hvclient.PowerOn && n.osTarget != "" && n.osBefore != n.osTarget && listOS == n.osTarget {
		return true, now
	}
	if !n.startedAt.IsZero() && !sent.Before(n.startedAt.Add(gap)) {
		return true, now
	}
	quiet = n.quietSince
	if quiet.IsZero() {
		quiet = now
	}
	return now.Sub(quiet) >= gap, quiet
}
