package hivelocitysim

import (
	"slices"
	"time"
)

// maxHistory bounds each device's history; older transitions are dropped first.
const maxHistory = 1000

// Transition is a device's state from At on, as the API shows it: one entry of History.
type Transition struct {
	// At is when the state began: the time of the event (a reload's start, the installer's boot, its end, the end
	// of a power action), not the time a read noticed it.
	At          time.Time `json:"at"`
	PowerStatus string    `json:"powerStatus"`
	IsReload    bool      `json:"isReload"`
	OSName      string    `json:"osName"`
	SPSStatus   string    `json:"spsStatus"`
	Hostname    string    `json:"hostname"`
}

// sameState reports whether t and u show the same state, whenever they began.
func (t Transition) sameState(u Transition) bool {
	t.At = u.At
	return t == u
}

// journal is what the simulator remembers of a device beyond its state: its history and its latest tag write.
// Neither is part of State: a restored device starts a new history.
type journal struct {
	history   []Transition
	lastWrite PreviousWrite
}

// History returns device id's transitions, oldest first: the state it was seeded (or restored) with, then one
// entry for every change of its power, reload state, OS, spsStatus or hostname, at most the last 1,000. It
// returns nil for an unknown device. Transitions due by now are included.
func (s *Simulator) History(id int32) []Transition {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devices[id]
	if d == nil {
		return nil
	}
	s.advance(d, s.clock.Now())
	return slices.Clone(s.journalOf(id).history)
}

// journalOf returns device id's journal, creating it. Callers hold s.mu.
func (s *Simulator) journalOf(id int32) *journal {
	j := s.journals[id]
	if j == nil {
		j = &journal{}
		s.journals[id] = j
	}
	return j
}

// startJournal gives d a new journal whose history begins with d's state at t and whose latest tag write is d's
// latest tags, written by nobody at t. Callers hold s.mu.
func (s *Simulator) startJournal(d *DeviceState, t time.Time) {
	tags := d.Tags
	if n := len(d.PendingTagWrites); n > 0 {
		tags = d.PendingTagWrites[n-1].Tags
	}
	s.journals[d.ID] = &journal{lastWrite: PreviousWrite{Tags: cloneTags(tags), Time: t}}
	s.note(d, t)
}

// note appends d's state to its history, as of at, if it differs from the last entry. Callers hold s.mu and call
// it after every change of what a Transition shows.
func (s *Simulator) note(d *DeviceState, at time.Time) {
	j := s.journalOf(d.ID)
	t := Transition{At: at, PowerStatus: d.PowerStatus, IsReload: d.IsReload, OSName: d.OSName,
		SPSStatus: d.SPSStatus, Hostname: d.Hostname}
	if n := len(j.history); n > 0 && j.history[n-1].sameState(t) {
		return
	}
	if len(j.history) >= maxHistory {
		j.history = slices.Delete(j.history, 0, len(j.history)-maxHistory+1)
	}
	j.history = append(j.history, t)
}
