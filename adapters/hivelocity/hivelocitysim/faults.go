package hivelocitysim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"
)

// FaultKind names a failure the simulator injects.
type FaultKind string

// Fault kinds. Each applies to every device or, with Fault.DeviceID, to one device (request faults then hit only
// requests naming that device).
const (
	// FaultServerError answers requests with Fault.Status (default 502) and an HTML page, as a proxy in front of
	// the API does; the answer carries no rate-limit headers.
	FaultServerError FaultKind = "server_error"
	// FaultRateLimitStorm answers every request 429 with the documented body; X-RateLimit-Reset points at the end
	// of the storm (Fault.For) or, for an open-ended storm, of the budget window. Storm answers use no budget.
	FaultRateLimitStorm FaultKind = "rate_limit_storm"
	// FaultStuckReload keeps a reload from ever finishing: isReload stays true and the device, its installer
	// running, stays ON. A reload it held finishes when the fault ends.
	FaultStuckReload FaultKind = "stuck_reload"
	// FaultStuckReloadOff keeps a reload's installer from booting: isReload stays true and the device stays OFF.
	// When the fault ends, the installer boots and runs its full time.
	FaultStuckReloadOff FaultKind = "stuck_reload_off"
	// FaultFailedReload makes a reload end badly: isReload false, power OFF, spsStatus FAILED, the OS unchanged.
	FaultFailedReload FaultKind = "failed_reload"
	// FaultIgnoredShutdown acknowledges a shutdown (202) but leaves the power ON.
	FaultIgnoredShutdown FaultKind = "ignored_shutdown"
	// FaultVanishedDevice answers 404 for the device and leaves it out of the list from then on.
	FaultVanishedDevice FaultKind = "vanished_device"
	// FaultDelayedTagWrites acknowledges tag writes (PUT tags and the tags of a reload PUT) at once but shows them
	// to reads only Fault.Delay later — the window in which last-writer-wins claiming is unsafe.
	// With MaxDelay, each write's delay is drawn uniformly from [Delay, MaxDelay]; writes still show in the order
	// they were made, so the last writer wins.
	FaultDelayedTagWrites FaultKind = "delayed_tag_writes"
	// FaultStaleList answers the device list from a snapshot at most Fault.MaxAge old: taken when the fault is set
	// and retaken when a list request finds it older. With a DeviceID only that device's entry is stale.
	FaultStaleList FaultKind = "stale_list"
	// FaultSlowAnswers gives every answer (with DeviceID, every answer naming that device) a round trip drawn
	// uniformly from [Delay, MaxDelay] (MaxDelay 0: exactly Delay), split at random into a wait before the request
	// is applied and a wait before its answer is written. The moment the API reads or applies a request is thus
	// anywhere within the client's round trip, which is what a claim proof must survive. The request log's Time is
	// the moment the request was applied.
	FaultSlowAnswers FaultKind = "slow_answers"
	// FaultReloadStartLag accepts a reload PUT (200) but begins the reload only Delay later. Until then every read
	// (device, power, list, dump) shows the device as before: isReload false, the old power, OS and spsStatus. The
	// PUT's tags are written at once, as without the fault. A power action in the lag is accepted; the reload
	// cancels it when it begins.
	FaultReloadStartLag FaultKind = "reload_start_lag"
	// FaultConcurrentReloadAccepted accepts a reload PUT of a device that is already reloading, or whose reload is
	// in its start lag, and restarts the reload from the new PUT (a second reload in DeviceState.Reloads and the
	// log), as the real API may: it documents no 409 for that. Without it the simulator answers 409.
	FaultConcurrentReloadAccepted FaultKind = "concurrent_reload_accepted"
	// FaultRefused answers requests of Op (empty: every PUT and POST) with Status (a 4xx, default 403) and Message
	// in the API's JSON error body; Count limits it as for server_error. Nothing changes on the device. Faults of
	// one device with different Ops are kept side by side.
	FaultRefused FaultKind = "refused"
)

// FaultKinds returns every fault kind.
func FaultKinds() []FaultKind {
	return []FaultKind{FaultServerError, FaultRateLimitStorm, FaultStuckReload, FaultStuckReloadOff,
		FaultFailedReload, FaultIgnoredShutdown, FaultVanishedDevice, FaultDelayedTagWrites, FaultStaleList,
		FaultSlowAnswers, FaultReloadStartLag, FaultConcurrentReloadAccepted, FaultRefused}
}

// Fault is an injected failure. Fault durations are clock time and are not divided by the time scale.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// DeviceID scopes the fault to one device; 0 means every device.
	DeviceID int32 `json:"deviceId,omitempty"`
	// For is how long the fault lasts from SetFault; 0 means until cleared.
	For time.Duration `json:"for,omitempty"`
	// Count limits a server_error, rate_limit_storm or refused to that many requests; 0 means no limit. Faults
	// reports the requests left.
	Count int `json:"count,omitempty"`
	// Status is the 5xx status of a server_error (0 means 502) or the 4xx status of a refused (0 means 403).
	Status int `json:"status,omitempty"`
	// Delay is how long a delayed tag write stays invisible, the shortest round trip of a slow answer, or a
	// reload's start lag. delayed_tag_writes and slow_answers need Delay or MaxDelay positive, reload_start_lag a
	// positive Delay.
	Delay time.Duration `json:"delay,omitempty"`
	// MaxDelay, for delayed_tag_writes and slow_answers, makes each delay random in [Delay, MaxDelay]; 0 means
	// exactly Delay. It must not be below Delay.
	MaxDelay time.Duration `json:"maxDelay,omitempty"`
	// Op is the operation a refused fault refuses; empty means every PUT and POST.
	Op Operation `json:"op,omitempty"`
	// Message is the message of a refused fault's error body; empty means the API's usual text for Status.
	Message string `json:"message,omitempty"`
	// MaxAge is the oldest snapshot a stale_list serves; it must be positive for stale_list.
	MaxAge time.Duration `json:"maxAge,omitempty"`
}

// activeFault is an installed fault with its clock-time bounds and state.
type activeFault struct {
	Fault
	setAt   time.Time
	expires time.Time // zero: until cleared
	// snapshot and snapAt hold a stale_list's device list.
	snapshot []bareMetalDevice
	snapAt   time.Time
}

func (f *activeFault) activeAt(t time.Time) bool {
	return !t.Before(f.setAt) && (f.expires.IsZero() || t.Before(f.expires))
}

func (f Fault) validate() error {
	if !slices.Contains(FaultKinds(), f.Kind) {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidFault, f.Kind)
	}
	if f.DeviceID < 0 || f.For < 0 || f.Count < 0 || f.Delay < 0 || f.MaxDelay < 0 || f.MaxAge < 0 {
		return fmt.Errorf("%w: negative field in %+v", ErrInvalidFault, f)
	}
	if err := f.validateApplies(); err != nil {
		return err
	}
	switch {
	case f.Kind == FaultServerError && f.Status != 0 && (f.Status < 500 || f.Status > 599):
		return fmt.Errorf("%w: status %d is not a 5xx", ErrInvalidFault, f.Status)
	case f.Kind == FaultRefused && f.Status != 0 && (f.Status < 400 || f.Status > 499):
		return fmt.Errorf("%w: status %d is not a 4xx", ErrInvalidFault, f.Status)
	case (f.Kind == FaultDelayedTagWrites || f.Kind == FaultSlowAnswers) && f.Delay == 0 && f.MaxDelay == 0:
		return fmt.Errorf("%w: %s needs a positive delay or maxDelay", ErrInvalidFault, f.Kind)
	case f.MaxDelay != 0 && f.MaxDelay < f.Delay:
		return fmt.Errorf("%w: maxDelay %s is below delay %s", ErrInvalidFault, f.MaxDelay, f.Delay)
	case f.Kind == FaultReloadStartLag && f.Delay == 0:
		return fmt.Errorf("%w: %s needs a positive delay", ErrInvalidFault, f.Kind)
	case f.Kind == FaultStaleList && f.MaxAge == 0:
		return fmt.Errorf("%w: %s needs a positive maxAge", ErrInvalidFault, f.Kind)
	case f.Op != "" && (f.Op == OpUnknown || !slices.ContainsFunc(apiRoutes(), func(r route) bool { return r.op == f.Op })):
		return fmt.Errorf("%w: unknown op %q", ErrInvalidFault, f.Op)
	}
	return nil
}

// validateApplies refuses fields set on a kind they do not apply to.
func (f Fault) validateApplies() error {
	fields := []struct {
		name  string
		set   bool
		kinds []FaultKind
	}{
		{"count", f.Count != 0, []FaultKind{FaultServerError, FaultRateLimitStorm, FaultRefused}},
		{"status", f.Status != 0, []FaultKind{FaultServerError, FaultRefused}},
		{"delay", f.Delay != 0, []FaultKind{FaultDelayedTagWrites, FaultSlowAnswers, FaultReloadStartLag}},
		{"maxDelay", f.MaxDelay != 0, []FaultKind{FaultDelayedTagWrites, FaultSlowAnswers}},
		{"maxAge", f.MaxAge != 0, []FaultKind{FaultStaleList}},
		{"op", f.Op != "", []FaultKind{FaultRefused}},
		{"message", f.Message != "", []FaultKind{FaultRefused}},
	}
	for _, fl := range fields {
		if fl.set && !slices.Contains(fl.kinds, f.Kind) {
			return fmt.Errorf("%w: %s applies only to %v", ErrInvalidFault, fl.name, fl.kinds)
		}
	}
	return nil
}

// withDefaults fills in the defaults of the fields Faults reports.
func (f Fault) withDefaults() Fault {
	switch f.Kind {
	case FaultServerError:
		if f.Status == 0 {
			f.Status = http.StatusBadGateway
		}
	case FaultRefused:
		if f.Status == 0 {
			f.Status = http.StatusForbidden
		}
		if f.Message == "" {
			f.Message = refusalMessage(f.Status)
		}
	default: // the other kinds have no defaulted field
	}
	return f
}

// refusalMessage is the API's usual message for a 4xx: Hivelocity's API is a Flask application, whose framework
// (werkzeug) answers with these descriptions unless the handler gives its own.
func refusalMessage(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "The browser (or proxy) sent a request that this server could not understand."
	case http.StatusForbidden:
		return "You don't have the permission to access the requested resource. It is either read-protected or not readable by the server."
	case http.StatusNotFound:
		return msgURLNotFound
	case http.StatusConflict:
		return "A conflict happened while processing the request. The resource might have been modified while the request was being processed."
	case http.StatusUnprocessableEntity:
		return "The request was well-formed but was unable to be followed due to semantic errors."
	}
	return http.StatusText(status)
}

// randomDelay draws a delay uniformly from [f.Delay, f.MaxDelay], or returns f.Delay without a MaxDelay.
func (f Fault) randomDelay() time.Duration {
	if f.MaxDelay <= f.Delay {
		return f.Delay
	}
	return f.Delay + rand.N(f.MaxDelay-f.Delay+1) //nolint:gosec // simulated delay, not a secret
}

// SetFault installs f from now on, replacing a fault of the same kind and device (and, for refused, Op). It returns an error wrapping
// ErrInvalidFault, and changes nothing, if the kind is unknown, a field is negative, or a field does not apply to
// the kind (see Fault).
func (s *Simulator) SetFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	f = f.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.advanceAll(now)
	s.faults = slices.DeleteFunc(s.faults, func(g *activeFault) bool {
		return g.Kind == f.Kind && g.DeviceID == f.DeviceID && g.Op == f.Op
	})
	s.reanchorHeld(now)
	af := &activeFault{Fault: f, setAt: now}
	if f.For > 0 {
		af.expires = now.Add(f.For)
	}
	if f.Kind == FaultStaleList {
		af.snapshot, af.snapAt = s.listDevices(now), now
	}
	s.faults = append(s.faults, af)
	s.logger.Info("fault set", "kind", f.Kind, "device_id", f.DeviceID, "for", f.For, "count", f.Count)
	return nil
}

// ClearFault removes the faults of the given kind and device (0: the all-devices faults; for refused, of every
// Op) and reports whether there was one. A reload step a stuck fault held past its time happens now: a held installer boots now and runs its
// full time, a held end is now.
func (s *Simulator) ClearFault(kind FaultKind, deviceID int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.advanceAll(now)
	found := s.dropFault(kind, deviceID)
	s.reanchorHeld(now)
	s.logger.Info("fault cleared", "kind", kind, "device_id", deviceID, "found", found)
	return found
}

// ClearFaults removes every fault.
func (s *Simulator) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.advanceAll(now)
	s.faults = nil
	s.reanchorHeld(now)
	s.logger.Info("faults cleared")
}

// Faults returns the faults in effect now, in the order they were set; Count is what is left of it.
func (s *Simulator) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var out []Fault
	for _, f := range s.faults {
		if f.activeAt(now) {
			out = append(out, f.Fault)
		}
	}
	return out
}

// reanchorHeld moves reload steps that faults hold past their time to now, so that a step released by removing its
// fault happens then rather than back-dated to when it was due. Callers hold s.mu and have advanced every device
// to now, so a step still due is a held one.
func (s *Simulator) reanchorHeld(now time.Time) {
	for _, d := range s.devices {
		r := d.Reload
		switch {
		case r == nil:
		case d.PowerStatus == PowerOff && !now.Before(r.PowerOnAt):
			r.DoneAt = now.Add(r.DoneAt.Sub(r.PowerOnAt))
			r.PowerOnAt = now
		case d.PowerStatus == PowerOn && !now.Before(r.DoneAt):
			r.DoneAt = now
		}
	}
}

func (s *Simulator) dropFault(kind FaultKind, deviceID int32) bool {
	n := len(s.faults)
	s.faults = slices.DeleteFunc(s.faults, func(f *activeFault) bool { return f.Kind == kind && f.DeviceID == deviceID })
	return len(s.faults) != n
}

// faultAt returns the fault of kind that applies to device id at t, preferring one scoped to the device; id 0
// (a request naming no device) matches only all-device faults. Callers hold s.mu.
func (s *Simulator) faultAt(kind FaultKind, id int32, t time.Time) *activeFault {
	var all *activeFault
	for _, f := range s.faults {
		if f.Kind != kind || !f.activeAt(t) {
			continue
		}
		if f.DeviceID != 0 && f.DeviceID == id {
			return f
		}
		if f.DeviceID == 0 && all == nil {
			all = f
		}
	}
	return all
}

// releasedAt returns when a step due at t may happen under the stuck fault kind: t itself, or the end of the
// faults holding it. ok is false while a fault without end holds it.
func (s *Simulator) releasedAt(kind FaultKind, id int32, t time.Time) (at time.Time, ok bool) {
	for range len(s.faults) + 1 {
		f := s.faultAt(kind, id, t)
		if f == nil {
			return t, true
		}
		if f.expires.IsZero() {
			return time.Time{}, false
		}
		t = f.expires
	}
	return t, true
}

// takeRequestFault returns the server_error or rate_limit_storm that answers a request naming device id (0:
// none) at now, and uses up one of its count. Callers hold s.mu.
func (s *Simulator) takeRequestFault(kind FaultKind, id int32, now time.Time) *activeFault {
	f := s.faultAt(kind, id, now)
	if f == nil || f.Count == 0 {
		return f
	}
	s.useCount(f)
	return f
}

// useCount uses up one of f's count and removes f when none is left. Callers hold s.mu.
func (s *Simulator) useCount(f *activeFault) {
	f.Count--
	if f.Count == 0 {
		s.faults = slices.DeleteFunc(s.faults, func(g *activeFault) bool { return g == f })
	}
}

// takeRefusal returns the refused fault that answers a request of op (with method) naming device id (0: none) at
// now, preferring one scoped to the device, and uses up one of its count. Callers hold s.mu.
func (s *Simulator) takeRefusal(op Operation, method string, id int32, now time.Time) *activeFault {
	var match *activeFault
	for _, f := range s.faults {
		if f.Kind != FaultRefused || !f.activeAt(now) || (f.DeviceID != 0 && f.DeviceID != id) {
			continue
		}
		if (f.Op == "" && method != http.MethodPut && method != http.MethodPost) || (f.Op != "" && f.Op != op) {
			continue
		}
		if match == nil || match.DeviceID == 0 && f.DeviceID != 0 {
			match = f
		}
	}
	if match != nil && match.Count > 0 {
		s.useCount(match)
	}
	return match
}

// staleList applies a stale_list fault to the current list: the whole list from the snapshot, or one device's
// entry. Snapshots older than MaxAge are retaken first. It reports whether a fault applied. Callers hold s.mu.
func (s *Simulator) staleList(current []bareMetalDevice, now time.Time) ([]bareMetalDevice, bool) {
	stale := false
	for _, f := range s.faults {
		if f.Kind != FaultStaleList || !f.activeAt(now) {
			continue
		}
		if now.Sub(f.snapAt) > f.MaxAge {
			f.snapshot, f.snapAt = s.listDevices(now), now
		}
		stale = true
		if f.DeviceID == 0 {
			return cloneList(f.snapshot), true
		}
		old := slices.IndexFunc(f.snapshot, func(d bareMetalDevice) bool { return d.DeviceID == f.DeviceID })
		cur := slices.IndexFunc(current, func(d bareMetalDevice) bool { return d.DeviceID == f.DeviceID })
		switch {
		case old >= 0 && cur >= 0:
			current[cur] = f.snapshot[old].clone()
		case old >= 0:
			current = append(current, f.snapshot[old].clone())
			slices.SortFunc(current, func(a, b bareMetalDevice) int { return cmp.Compare(a.DeviceID, b.DeviceID) })
		case cur >= 0:
			current = slices.Delete(current, cur, cur+1)
		}
	}
	return current, stale
}

func cloneList(list []bareMetalDevice) []bareMetalDevice {
	out := make([]bareMetalDevice, len(list))
	for i := range list {
		out[i] = list[i].clone()
	}
	return out
}
