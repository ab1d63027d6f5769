package hivelocitysim

import "time"

// reloadUpdate is a validated reload request.
type reloadUpdate struct {
	osName, hostname, script string
	sshKeyID                 int32
}

// acceptReload accepts a reload of d at now and returns when it begins, and the reload_start_lag fault that put
// that later, if any. Without a lag it begins at once (beginReload); with one, it waits in d.PendingReload,
// replacing a reload waiting there. Callers hold s.mu and have checked the preconditions.
func (s *Simulator) acceptReload(d *DeviceState, u reloadUpdate, now time.Time) (time.Time, FaultKind) {
	begins, fault := now, FaultKind("")
	if f := s.faultAt(FaultReloadStartLag, d.ID, now); f != nil {
		begins, fault = now.Add(f.Delay), FaultReloadStartLag
	}
	powerOnAt := begins.Add(s.scaled(s.durations.ReloadPoweredOff))
	r := &Reload{
		OSName:         u.osName,
		Hostname:       u.hostname,
		Script:         u.script,
		PublicSSHKeyID: u.sshKeyID,
		Started:        begins,
		PowerOnAt:      powerOnAt,
		DoneAt:         powerOnAt.Add(s.scaled(s.durations.ReloadPoweredOn)),
	}
	d.Reloads++
	d.PendingReload = r
	s.advance(d, now)
	return begins, fault
}

// beginReload begins r, d's pending reload, at r.Started: the device goes OFF and reports RELOADING, with r's
// hostname, script and SSH key; its OS changes when the reload is done. A running power action is cancelled and a
// running reload replaced. Callers hold s.mu and have advanced d to r.Started.
func (s *Simulator) beginReload(d *DeviceState, r *Reload) {
	d.PendingReload = nil
	d.Reload = r
	d.IsReload = true
	d.PowerTransition = nil
	d.PowerStatus, d.SPSStatus = PowerOff, StatusReloading
	d.Hostname, d.Script, d.PublicSSHKeyID = r.Hostname, r.Script, r.PublicSSHKeyID
	s.note(d, r.Started)
}

// advanceReload applies the steps of d's running reload due by now, as far as stuck faults let them happen.
// Callers hold s.mu.
func (s *Simulator) advanceReload(d *DeviceState, now time.Time) {
	r := d.Reload
	if d.PowerStatus == PowerOff {
		at, ok := s.releasedAt(FaultStuckReloadOff, d.ID, r.PowerOnAt)
		if !ok || now.Before(at) {
			return
		}
		// A held installer still needs its full run once it boots.
		r.DoneAt = at.Add(r.DoneAt.Sub(r.PowerOnAt))
		r.PowerOnAt = at
		d.PowerStatus = PowerOn
		s.note(d, at)
	}
	at, ok := s.releasedAt(FaultStuckReload, d.ID, r.DoneAt)
	if !ok || now.Before(at) {
		return
	}
	d.Reload, d.IsReload = nil, false
	if s.faultAt(FaultFailedReload, d.ID, at) != nil {
		d.PowerStatus, d.SPSStatus = PowerOff, StatusFailed
	} else {
		d.OSName, d.PowerStatus, d.SPSStatus = r.OSName, PowerOn, StatusInUse
	}
	s.note(d, at)
}
