package hivelocitysim

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Device is a bare-metal device as an operator sets it up: what Seed accepts and what the API shows of it.
type Device struct {
	// ID is the device id; it must be positive.
	ID int32 `json:"deviceId"`
	// Hostname defaults to "device-<id>.hivelocity.example".
	Hostname string `json:"hostname"`
	// LocationName is the facility (region), e.g. LAX2 or NYC1; it is required.
	LocationName string `json:"locationName"`
	// ProductID is the device type; it is required. An unknown product joins the catalogue.
	ProductID int32 `json:"productId"`
	// ProductName defaults to the catalogue's name for ProductID.
	ProductName string `json:"productName"`
	// PrimaryIP defaults to an address derived from the id.
	PrimaryIP string `json:"primaryIp"`
	// OSName is the installed operating system.
	OSName string `json:"osName"`
	// PowerStatus is ON (the default) or OFF.
	PowerStatus string `json:"powerStatus"`
	// SPSStatus is the provisioning state: IN_USE (the default), RELOADING while a reload runs, FAILED after a
	// failed one.
	SPSStatus string `json:"spsStatus"`
	// Tags are the user tags, in order.
	Tags []string `json:"tags"`
	// Script is the cloud-init or post-install script of the last reload.
	Script string `json:"script,omitempty"`
	// PublicSSHKeyID is the SSH key of the last reload.
	PublicSSHKeyID int32 `json:"publicSshKeyId,omitempty"`
	// ServiceID and OrderID are billing references the API reports as given.
	ServiceID int32 `json:"serviceId,omitempty"`
	OrderID   int32 `json:"orderId,omitempty"`
}

// DeviceState is a device's full state: what the API shows plus the simulator's bookkeeping.
type DeviceState struct {
	Device
	// IsReload is true while a reload runs, as DeviceDump.isReload.
	IsReload bool `json:"isReload"`
	// Reload is the running reload, if any.
	Reload *Reload `json:"reload,omitempty"`
	// PendingReload is a reload accepted but not begun (the reload_start_lag fault), if any; it begins at its
	// Started, replacing a running reload (concurrent_reload_accepted).
	PendingReload *Reload `json:"pendingReload,omitempty"`
	// PowerTransition is the running power action, if any; PowerStatus shows the old state until it is done.
	PowerTransition *PowerTransition `json:"powerTransition,omitempty"`
	// PendingTagWrites are acknowledged tag writes not yet visible (the delayed_tag_writes fault), oldest first.
	PendingTagWrites []TagWrite `json:"pendingTagWrites,omitempty"`
	// Reloads counts the reloads accepted since the device was seeded, including one in its start lag and ones
	// that a concurrent reload replaced.
	Reloads int `json:"reloads"`
	// Vanished is true while a vanished_device fault hides the device from the API.
	Vanished bool `json:"vanished,omitempty"`
}

// Reload is an accepted reload.
type Reload struct {
	// OSName is the operating system being installed; the device reports it once the reload is done.
	OSName string `json:"osName"`
	// Hostname is the hostname the reload asked for (the device reports it once the reload begins).
	Hostname string `json:"hostname"`
	// Script and PublicSSHKeyID are what the reload installs (the device reports them once it begins).
	Script         string `json:"script,omitempty"`
	PublicSSHKeyID int32  `json:"publicSshKeyId,omitempty"`
	// Started is when the reload begins: the device goes OFF then. It is when the PUT was accepted unless a
	// reload_start_lag fault put it later.
	Started time.Time `json:"started"`
	// PowerOnAt is when the installer boots (power ON), unless a stuck_reload_off fault holds it.
	PowerOnAt time.Time `json:"powerOnAt"`
	// DoneAt is when the reload ends, unless a stuck_reload fault holds it.
	DoneAt time.Time `json:"doneAt"`
}

// PowerAction is the action of POST /device/{id}/power.
type PowerAction string

// Power actions the API accepts.
const (
	PowerBoot     PowerAction = "boot"
	PowerReboot   PowerAction = "reboot"
	PowerShutdown PowerAction = "shutdown"
)

// PowerTransition is a running power action.
type PowerTransition struct {
	Action PowerAction `json:"action"`
	// Target is the power state at DoneAt.
	Target string `json:"target"`
	// Started is when the action was accepted; DoneAt is when the device reports Target.
	Started time.Time `json:"started"`
	DoneAt  time.Time `json:"doneAt"`
}

// TagWrite is an acknowledged tag write that becomes visible at VisibleAt.
type TagWrite struct {
	// Tags is the list written.
	Tags []string `json:"tags"`
	// Written is when the write was acknowledged.
	Written   time.Time `json:"written"`
	VisibleAt time.Time `json:"visibleAt"`
}

func (d *DeviceState) clone() DeviceState {
	c := *d
	c.Tags = cloneTags(d.Tags)
	if d.Reload != nil {
		r := *d.Reload
		c.Reload = &r
	}
	if d.PendingReload != nil {
		r := *d.PendingReload
		c.PendingReload = &r
	}
	if d.PowerTransition != nil {
		p := *d.PowerTransition
		c.PowerTransition = &p
	}
	c.PendingTagWrites = nil
	for _, w := range d.PendingTagWrites {
		w.Tags = cloneTags(w.Tags)
		c.PendingTagWrites = append(c.PendingTagWrites, w)
	}
	return c
}

// cloneTags copies a tag list; the result is never nil, so it encodes as [] rather than null.
func cloneTags(tags []string) []string {
	out := make([]string, len(tags))
	copy(out, tags)
	return out
}

// Seed adds the devices, replacing devices with the same ID (their running reloads, power actions, pending tag
// writes and history are dropped). Missing optional fields get the defaults documented on Device. It returns an error
// wrapping ErrInvalidDevice, and adds nothing, if a device has no positive ID, no location or no product, an
// unknown power state, or an ID used twice in the call.
func (s *Simulator) Seed(devices ...Device) error {
	seen := map[int32]bool{}
	for i := range devices {
		d := &devices[i]
		if err := d.validate(); err != nil {
			return err
		}
		if seen[d.ID] {
			return fmt.Errorf("%w: device %d given twice", ErrInvalidDevice, d.ID)
		}
		seen[d.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for i := range devices {
		d := devices[i] // a copy: withDefaults fills it in
		p, known := s.products[d.ProductID]
		if !known {
			p = Product{ID: d.ProductID, Name: d.ProductName, OperatingSystems: DefaultOperatingSystems()}
			if p.Name == "" {
				p.Name = fmt.Sprintf("Product %d", d.ProductID)
			}
			s.products[p.ID] = p
		}
		d = d.withDefaults(p)
		st := &DeviceState{Device: d}
		s.devices[d.ID] = st
		s.startJournal(st, now)
	}
	s.logger.Info("devices seeded", "count", len(devices))
	return nil
}

func (d Device) validate() error {
	switch {
	case d.ID <= 0:
		return fmt.Errorf("%w: deviceId %d must be positive", ErrInvalidDevice, d.ID)
	case d.LocationName == "":
		return fmt.Errorf("%w: device %d has no locationName", ErrInvalidDevice, d.ID)
	case d.ProductID <= 0:
		return fmt.Errorf("%w: device %d has no productId", ErrInvalidDevice, d.ID)
	case d.PowerStatus != "" && d.PowerStatus != PowerOn && d.PowerStatus != PowerOff:
		return fmt.Errorf("%w: device %d has powerStatus %q, want ON or OFF", ErrInvalidDevice, d.ID, d.PowerStatus)
	case d.SPSStatus == StatusReloading:
		return fmt.Errorf("%w: device %d cannot be seeded reloading; seed it and PUT a reload", ErrInvalidDevice, d.ID)
	}
	return nil
}

func (d Device) withDefaults(p Product) Device {
	if d.Hostname == "" {
		d.Hostname = fmt.Sprintf("device-%d.hivelocity.example", d.ID)
	}
	if d.ProductName == "" {
		d.ProductName = p.Name
	}
	if d.PrimaryIP == "" {
		d.PrimaryIP = fmt.Sprintf("10.%d.%d.%d", d.ID>>16&0xff, d.ID>>8&0xff, d.ID&0xff)
	}
	if d.PowerStatus == "" {
		d.PowerStatus = PowerOn
	}
	if d.SPSStatus == "" {
		d.SPSStatus = StatusInUse
	}
	d.Tags = cloneTags(d.Tags)
	return d
}

// Device returns the state of the device with the given ID as of now, and whether it exists (a vanished device
// exists, with Vanished set).
func (s *Simulator) Device(id int32) (DeviceState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	d := s.devices[id]
	if d == nil {
		return DeviceState{}, false
	}
	s.advance(d, now)
	c := d.clone()
	c.Vanished = s.faultAt(FaultVanishedDevice, id, now) != nil
	return c, true
}

// Devices returns the state of every device as of now, by ID.
func (s *Simulator) Devices() []DeviceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	out := make([]DeviceState, 0, len(s.devices))
	for _, id := range slices.Sorted(maps.Keys(s.devices)) {
		d := s.devices[id]
		s.advance(d, now)
		c := d.clone()
		c.Vanished = s.faultAt(FaultVanishedDevice, id, now) != nil
		out = append(out, c)
	}
	return out
}

// advanceAll brings every device up to now. Callers hold s.mu and call it before changing faults, so that every
// transition due before the change is decided under the faults that were in effect then.
func (s *Simulator) advanceAll(now time.Time) {
	for _, d := range s.devices {
		s.advance(d, now)
	}
}

// advance applies every transition of d due at or before now, in the order they happened: visible tag writes,
// the end of a power action, the start of a reload out of its lag, and the steps of a reload. Callers hold s.mu.
func (s *Simulator) advance(d *DeviceState, now time.Time) {
	for len(d.PendingTagWrites) > 0 && !now.Before(d.PendingTagWrites[0].VisibleAt) {
		d.Tags = d.PendingTagWrites[0].Tags
		d.PendingTagWrites = d.PendingTagWrites[1:]
	}
	if len(d.PendingTagWrites) == 0 {
		d.PendingTagWrites = nil
	}
	if r := d.PendingReload; r != nil && !now.Before(r.Started) {
		s.advanceProcesses(d, r.Started)
		s.beginReload(d, r)
	}
	s.advanceProcesses(d, now)
}

// advanceProcesses applies the end of d's power action and the steps of its running reload due by now.
func (s *Simulator) advanceProcesses(d *DeviceState, now time.Time) {
	if p := d.PowerTransition; p != nil && !now.Before(p.DoneAt) {
		d.PowerStatus = p.Target
		d.PowerTransition = nil
		s.note(d, p.DoneAt)
	}
	if d.Reload != nil {
		s.advanceReload(d, now)
	}
}

// writeTags replaces d's tags with tags, the write of request c, at once or, under a delayed_tag_writes fault,
// after its delay. Writes become visible in the order they were made, so the last write wins. It records the
// write it replaced in c's log entry and returns the fault that delayed the write, if any. Callers hold s.mu.
func (s *Simulator) writeTags(d *DeviceState, tags []string, c *call) FaultKind {
	now := c.now
	tags = cloneTags(tags)
	j := s.journalOf(d.ID)
	prev := j.lastWrite.clone()
	c.entry.Previous = &prev
	j.lastWrite = PreviousWrite{Tags: cloneTags(tags), Seq: c.entry.Seq, Time: now, UserAgent: c.entry.UserAgent, KeyID: c.entry.KeyID}
	visible := now
	var fault FaultKind
	if f := s.faultAt(FaultDelayedTagWrites, d.ID, now); f != nil {
		visible, fault = now.Add(f.randomDelay()), FaultDelayedTagWrites
	}
	if n := len(d.PendingTagWrites); n > 0 && visible.Before(d.PendingTagWrites[n-1].VisibleAt) {
		visible = d.PendingTagWrites[n-1].VisibleAt
	}
	d.PendingTagWrites = append(d.PendingTagWrites, TagWrite{Tags: tags, Written: now, VisibleAt: visible})
	s.advance(d, now)
	return fault
}

// powerError is a refused power action: the HTTP status and the message of the error body.
type powerError struct {
	status  int
	message string
}

// Messages of refused power actions. The powered-off one is what the real API answers (CAPHV matches on it); the
// powered-on one is its mirror image.
const (
	msgPoweredOff = "Can't do this while server is powered off."
	msgPoweredOn  = "Can't do this while server is powered on."
	msgReloading  = "Can't do this while the device is reloading."
)

// powerAction applies action to d at now and returns the fault that swallowed it, if any. The device keeps
// reporting its old state until the action is done. Shutdown and reboot need the device ON, boot needs it OFF; an
// action repeated while it runs changes nothing. Callers hold s.mu and have advanced d to now.
func (s *Simulator) powerAction(d *DeviceState, action PowerAction, now time.Time) (FaultKind, *powerError) {
	if d.Reload != nil {
		return "", &powerError{409, msgReloading}
	}
	var target string
	var took time.Duration
	switch action {
	case PowerShutdown, PowerReboot:
		if d.PowerStatus != PowerOn {
			return "", &powerError{400, msgPoweredOff}
		}
		if action == PowerShutdown && s.faultAt(FaultIgnoredShutdown, d.ID, now) != nil {
			return FaultIgnoredShutdown, nil
		}
		target, took = PowerOff, s.durations.Shutdown
		if action == PowerReboot {
			target, took = PowerOn, s.durations.Shutdown+s.durations.Boot
		}
	case PowerBoot:
		if d.PowerStatus != PowerOff {
			return "", &powerError{400, msgPoweredOn}
		}
		target, took = PowerOn, s.durations.Boot
	}
	if p := d.PowerTransition; p != nil && p.Action == action {
		return "", nil
	}
	d.PowerTransition = &PowerTransition{Action: action, Target: target, Started: now, DoneAt: now.Add(s.scaled(took))}
	s.advance(d, now)
	return "", nil
}
