package hivelocity

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// Condition types the provisioner reports besides the runtime's.
const (
	// ConditionDevicesReady says whether the pool has replicas devices provisioned with its current spec ("n/m").
	ConditionDevicesReady = "DevicesReady"
	// ConditionDevicesAvailable says whether there are enough eligible spare devices for the pool's empty
	// slots, and if not, why the others were skipped.
	ConditionDevicesAvailable = "DevicesAvailable"
	// ConditionCredentialsValid says whether Hivelocity accepted the API key.
	ConditionCredentialsValid = "CredentialsValid"
	// ConditionAPIReachable says whether Hivelocity answered, and was not rate limiting.
	ConditionAPIReachable = "HivelocityAPIReachable"
	// ConditionDegraded is True while the pool has devices that failed, or replacements for devices it gave up
	// on that are not ready yet.
	ConditionDegraded = "Degraded"
)

// Reasons of the provisioner's conditions (and of Available).
const (
	ReasonAllDevicesReady     = "AllDevicesReady"
	ReasonDevicesProvisioning = "DevicesProvisioning"
	ReasonRollingUpdate       = "RollingUpdate"
	ReasonReleasing           = "Releasing"
	ReasonReleased            = "Released"
	ReasonNoAvailableDevice   = "NoAvailableDevice"
	ReasonDevicesEligible     = "DevicesEligible"
	ReasonNoneNeeded          = "NoneNeeded"
	ReasonInvalidSpec         = "InvalidSpec"
	ReasonSSHKeyNotFound      = "SSHKeyNotFound"
	ReasonOSNotOffered        = "OSNotOffered"
	ReasonKeyAccepted         = "KeyAccepted"
	ReasonUnauthorized        = "Unauthorized"
	ReasonNotChecked          = "NotChecked"
	ReasonReachable           = "Reachable"
	ReasonUnavailable         = "Unavailable"
	ReasonRateLimited         = "RateLimited"
	ReasonDeviceRemediated    = "DeviceRemediated"
	ReasonNoFailures          = "NoFailures"
	// ReasonRemediationHeldBack (Degraded): more devices failed than remediation.max_unhealthy lets be taken out
	// at once; the message counts them.
	ReasonRemediationHeldBack = "RemediationHeldBack"
	// ReasonScaling (Available): the pool owns more devices than replicas (a scale-down, a surge, a device being
	// taken out) or fewer; the message counts them.
	ReasonScaling = "Scaling"
	// ReasonCallRefused (Health): Hivelocity refused a call for a device RefusalLimit times in a row.
	ReasonCallRefused = "CallRefused"
)

// Keys of the report's data.
const (
	// DataDevices is the pool's devices: [{device_id, slot, state, power, primary_ip, since}], by slot.
	DataDevices = "devices"
	// DataDevicesOmitted counts the devices left out of DataDevices to keep the report small.
	DataDevicesOmitted = "devices_omitted"
	DataReady          = "ready"
	DataReplicas       = "replicas"
	// DataSpec is the hash of the pool's spec, as the devices' hyperfleet-spec tags carry it.
	DataSpec = "spec"
	// DataRemediated is the devices the pool gave up on since it was last fully ready: [{device_id, slot, why,
	// time}].
	DataRemediated = "remediated"
)

// maxReportedDevices keeps the data well under the API's 64 KiB.
const maxReportedDevices = 200

// maxRemediations bounds how many remediations the data remembers.
const maxRemediations = 20

// deviceRow is one device of the pool as the report shows it.
type deviceRow struct {
	ID        int32
	Slot      int
	State     State
	Power     string
	PrimaryIP string
	Since     time.Time
}

// remediation is a device the pool gave up on.
type remediation struct {
	DeviceID int32
	Slot     int
	Why      string // the permanent-error tag written
	At       time.Time
}

// summary is what a pass found and did, for the report.
type summary struct {
	Replicas   int
	Finalizing bool
	Finalized  bool
	Devices    []deviceRow
	Missing    int // empty slots left after this pass's claims
	Spares     int // eligible spare devices seen
	Skips      map[SkipReason]int
	Blocked    error // what keeps the pool from being provisioned: an invalid spec, an SSH key, an OS
	APIErr     error
	Remediated []remediation
	Spec       string
	// Held counts the failed devices remediation holds back, InRemediation those being taken out, and
	// MaxUnhealthy is the bound that holds them.
	Held, InRemediation, MaxUnhealthy int
	// Refusals are the pool's devices whose last calls Hivelocity refused.
	Refusals []refusal
}

// counts are the pool's devices by kind.
type counts struct{ ready, current, outdated, provisioning, off, failed, releasing, remediating int }

func countOf(rows []deviceRow) counts {
	var c counts
	for _, d := range rows {
		switch d.State {
		case StateReady:
			c.ready++
			c.current++
		case StateOutdated:
			c.ready++
			c.outdated++
		case StateClaimed, StateReloading, StateInstalling:
			c.provisioning++
		case StateOff:
			c.off++
		case StateFailed:
			c.failed++
		case StateReleasing:
			c.releasing++
		case StateRemediating:
			c.remediating++
		}
	}
	return c
}

// fullyReady reports whether the pool has all it should: replicas devices ready with the current spec, and
// nothing else going on.
func (s summary) fullyReady() bool {
	c := countOf(s.Devices)
	return !s.Finalizing && c.current == s.Replicas && len(s.Devices) == s.Replicas && s.Missing == 0
}

// outcomeOf computes the report of a pass. It is pure: the pass acts, this decides what to say. Available is True
// only when the pool has converged: it owns exactly replicas devices, all ready with the current spec, and nothing
// is being released or taken out (so that the API's phase says Progressing until then).
func outcomeOf(s summary) adapter.Outcome {
	c := countOf(s.Devices)
	ready := readyCondition(s, c)
	avail := conditions.Reported{Status: conditions.True, Reason: ReasonAllDevicesReady, Message: ready.Message}
	switch {
	case ready.Status != conditions.True || s.Finalizing || s.Blocked != nil:
		avail = conditions.Reported{Status: conditions.False, Reason: ready.Reason, Message: ready.Message}
	case !s.fullyReady():
		avail = conditions.Reported{Status: conditions.False, Reason: ReasonScaling,
			Message: fmt.Sprintf("%s; the pool owns %d devices for %d replicas", ready.Message, len(s.Devices), s.Replicas)}
	}
	creds, reach := apiConditions(s.APIErr)
	return adapter.Outcome{
		Available:  avail,
		Conditions: []conditions.Reported{ready, devicesAvailable(s), creds, reach, degraded(s, c)},
		Data:       dataOf(s, c),
		Finalized:  s.Finalized,
	}
}

func readyCondition(s summary, c counts) conditions.Reported {
	r := conditions.Reported{Type: ConditionDevicesReady, Status: conditions.False}
	msg := fmt.Sprintf("%d/%d devices ready", c.current, s.Replicas)
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{c.outdated, "on the previous spec"}, {c.provisioning, "provisioning"}, {c.off, "powered off"},
		{c.failed, "failed"}, {c.remediating, "being taken out"}, {c.releasing, "being released"}, {s.Missing, "missing"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) > 0 {
		msg += " (" + strings.Join(parts, ", ") + ")"
	}
	msg += refusalNote(s)
	r.Message = msg
	switch {
	case s.Finalized:
		r.Reason, r.Message = ReasonReleased, "every device of the pool has been released"
	case s.Finalizing:
		r.Reason, r.Message = ReasonReleasing, fmt.Sprintf("the pool is being deleted: %d devices left to release", len(s.Devices))+finalizeBlockers(s)
	case s.Blocked != nil:
		r.Reason, r.Message = blockedReason(s.Blocked), msg+": "+s.Blocked.Error()
	case c.current >= s.Replicas:
		r.Status, r.Reason = conditions.True, ReasonAllDevicesReady
	case s.Spares < s.Missing && c.provisioning == 0:
		r.Reason = ReasonNoAvailableDevice
	case c.outdated > 0:
		r.Reason = ReasonRollingUpdate
	default:
		r.Reason = ReasonDevicesProvisioning
	}
	return r
}

// refusalNote says which devices' calls Hivelocity refuses, for the DevicesReady message.
func refusalNote(s summary) string {
	if s.Finalizing || len(s.Refusals) == 0 {
		return ""
	}
	parts := make([]string, 0, len(s.Refusals))
	for _, r := range s.Refusals {
		parts = append(parts, refusalText(r))
	}
	return "; refused: " + strings.Join(parts, "; ")
}

// refusalText names a device, the call Hivelocity refused, how often in a row, and its message.
func refusalText(r refusal) string {
	return fmt.Sprintf("device %d: %s refused %d time(s) in a row, next try at %s: %s", r.DeviceID, r.Call, r.Count,
		r.Next.UTC().Format(time.RFC3339), r.Message)
}

// finalizeBlockers says what keeps a deleted pool from finalizing when Hivelocity refuses to release a device,
// and how an operator forces it.
func finalizeBlockers(s summary) string {
	var parts []string
	for _, r := range s.Refusals {
		parts = append(parts, fmt.Sprintf("%s. Finalization waits for device %d: to force it, remove the %s* tags of device %d by hand "+
			"(it then keeps the pool's OS, user data and SSH key until it is wiped), then finalization completes", refusalText(r), r.DeviceID,
			TagPrefix, r.DeviceID))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// escalated returns the refusals that reached limit, as the error Health reports, or nil.
func escalated(refused []refusal, limit int) error {
	var errs []error
	for _, r := range refused {
		if r.Count >= limit {
			errs = append(errs, errors.New(refusalText(r)))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("hivelocity refuses calls for %d device(s): %w", len(errs), errors.Join(errs...))
}

func blockedReason(err error) string {
	switch {
	case errors.Is(err, errSSHKeyNotFound):
		return ReasonSSHKeyNotFound
	case errors.Is(err, errOSNotOffered):
		return ReasonOSNotOffered
	default:
		return ReasonInvalidSpec
	}
}

func devicesAvailable(s summary) conditions.Reported {
	r := conditions.Reported{Type: ConditionDevicesAvailable, Status: conditions.True}
	switch {
	case s.Finalizing || s.Missing == 0:
		r.Reason, r.Message = ReasonNoneNeeded, fmt.Sprintf("no device needed; %d eligible spare devices", s.Spares)
	case s.Spares >= s.Missing:
		r.Reason, r.Message = ReasonDevicesEligible, fmt.Sprintf("%d eligible spare devices for %d missing", s.Spares, s.Missing)
	default:
		r.Status, r.Reason = conditions.False, ReasonNoAvailableDevice
		r.Message = fmt.Sprintf("%d devices missing but %d eligible spare devices; skipped: %s", s.Missing, s.Spares, skipSummary(s.Skips))
	}
	return r
}

// apiConditions says what the first failed call to Hivelocity tells of the key and of the API.
func apiConditions(err error) (creds, reach conditions.Reported) {
	creds = conditions.Reported{Type: ConditionCredentialsValid, Status: conditions.True, Reason: ReasonKeyAccepted}
	reach = conditions.Reported{Type: ConditionAPIReachable, Status: conditions.True, Reason: ReasonReachable}
	notChecked := conditions.Reported{Type: ConditionCredentialsValid, Status: conditions.Unknown, Reason: ReasonNotChecked}
	switch {
	case err == nil, errors.Is(err, hvclient.ErrRejected), errors.Is(err, hvclient.ErrNotFound), errors.Is(err, hvclient.ErrLate):
	case errors.Is(err, hvclient.ErrUnauthorized):
		creds.Status, creds.Reason, creds.Message = conditions.False, ReasonUnauthorized, err.Error()
		if hvclient.StatusOf(err) == 0 { // the key file, not the API
			reach.Status, reach.Reason, reach.Message = conditions.Unknown, ReasonNotChecked, "no call was made without a key"
		}
	case errors.Is(err, hvclient.ErrRateLimited):
		creds, creds.Message = notChecked, "rate limited: "+err.Error()
		reach.Status, reach.Reason, reach.Message = conditions.False, ReasonRateLimited, err.Error()
	default:
		creds, creds.Message = notChecked, "no answer: "+err.Error()
		reach.Status, reach.Reason, reach.Message = conditions.False, ReasonUnavailable, err.Error()
	}
	return creds, reach
}

func degraded(s summary, c counts) conditions.Reported {
	r := conditions.Reported{Type: ConditionDegraded, Status: conditions.False, Reason: ReasonNoFailures,
		Message: "no device of the pool has failed since it was last whole"}
	if c.failed == 0 && c.remediating == 0 && len(s.Remediated) == 0 && s.Held == 0 {
		return r
	}
	r.Status, r.Reason = conditions.True, ReasonDeviceRemediated
	var parts []string
	if s.Held > 0 {
		r.Reason = ReasonRemediationHeldBack
		parts = append(parts, fmt.Sprintf("remediation held back: %d failed device(s) wait while %d are being taken out (remediation.max_unhealthy %d)",
			s.Held, s.InRemediation, s.MaxUnhealthy))
	}
	for _, d := range s.Devices {
		if d.State == StateFailed {
			parts = append(parts, fmt.Sprintf("device %d (slot %d) failed its reload", d.ID, d.Slot))
		}
	}
	for _, m := range s.Remediated {
		parts = append(parts, fmt.Sprintf("device %d (slot %d) taken out at %s: powered off and wiped, then marked %s; a replacement takes its slot",
			m.DeviceID, m.Slot, m.At.UTC().Format(time.RFC3339), m.Why))
	}
	r.Message = strings.Join(parts, "; ")
	if len(r.Message) > conditions.MaxConditionMessage {
		r.Message = r.Message[:conditions.MaxConditionMessage-3] + "…"
	}
	return r
}

func dataOf(s summary, c counts) map[string]any {
	rows := slices.Clone(s.Devices)
	slices.SortFunc(rows, func(a, b deviceRow) int {
		return cmp.Or(cmp.Compare(slotOrder(a.Slot), slotOrder(b.Slot)), cmp.Compare(a.ID, b.ID))
	})
	devices := make([]any, 0, min(len(rows), maxReportedDevices))
	for _, d := range rows[:min(len(rows), maxReportedDevices)] {
		devices = append(devices, map[string]any{"device_id": d.ID, "slot": d.Slot, "state": string(d.State), "power": d.Power,
			"primary_ip": d.PrimaryIP, "since": d.Since.UTC().Format(time.RFC3339)})
	}
	data := map[string]any{DataDevices: devices, DataReady: c.ready, DataReplicas: s.Replicas}
	if s.Spec != "" {
		data[DataSpec] = s.Spec
	}
	if n := len(rows) - len(devices); n > 0 {
		data[DataDevicesOmitted] = n
	}
	if len(s.Remediated) > 0 {
		rem := make([]any, 0, len(s.Remediated))
		for _, m := range s.Remediated {
			rem = append(rem, map[string]any{"device_id": m.DeviceID, "slot": m.Slot, "why": m.Why, "time": m.At.UTC().Format(time.RFC3339)})
		}
		data[DataRemediated] = rem
	}
	return data
}

// slotOrder sorts devices without a slot (being released) last.
func slotOrder(slot int) int {
	if slot < 0 {
		return int(^uint(0) >> 1)
	}
	return slot
}

// carry returns the remediations to report: the earlier ones, until the pool is fully ready again, and the new
// ones; the newest maxRemediations of them.
func carry(earlier, now []remediation, fullyReady bool) []remediation {
	var out []remediation
	if !fullyReady {
		out = append(out, earlier...)
	}
	for _, m := range now {
		if !slices.ContainsFunc(out, func(e remediation) bool { return e.DeviceID == m.DeviceID && e.Why == m.Why }) {
			out = append(out, m)
		}
	}
	if len(out) > maxRemediations {
		out = out[len(out)-maxRemediations:]
	}
	return out
}
