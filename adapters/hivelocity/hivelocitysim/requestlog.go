package hivelocitysim

import (
	"slices"
	"time"
)

// Operation names an API operation; the names are the client's method names without "Resource".
type Operation string

// Operations the simulator serves.
const (
	OpListDevices          Operation = "GetBareMetalDevice"
	OpGetDevice            Operation = "GetBareMetalDeviceId"
	OpReloadDevice         Operation = "PutBareMetalDeviceId"
	OpGetDeviceDump        Operation = "GetDeviceId"
	OpGetTags              Operation = "GetDeviceTagId"
	OpPutTags              Operation = "PutDeviceTagId"
	OpGetPower             Operation = "GetPower"
	OpPostPower            Operation = "PostPower"
	OpListSSHKeys          Operation = "GetSshKey"
	OpGetSSHKey            Operation = "GetSshKeyId"
	OpListOperatingSystems Operation = "GetProductOperatingSystems"
	// OpUnknown is a request for a path or method the simulator does not serve (answered 404).
	OpUnknown Operation = "Unknown"
)

// Request is one API request (admin requests are not logged), recorded when it was applied.
type Request struct {
	// Seq numbers requests from 1 in the order they were applied; it keeps counting across ResetRequests.
	Seq int64 `json:"seq"`
	// Time is when the request was applied: under a slow_answers fault, after its wait before and before its wait
	// after.
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	// Path is the API path without the /api/v2 prefix, e.g. /device/17/tags.
	Path  string    `json:"path"`
	Query string    `json:"query,omitempty"`
	Op    Operation `json:"op"`
	// DeviceID is the device the path names, 0 if none.
	DeviceID int32 `json:"deviceId,omitempty"`
	// KeyID identifies the X-API-KEY sent (see KeyID), valid or not; empty if none was sent.
	KeyID string `json:"keyId,omitempty"`
	// UserAgent is the User-Agent header sent.
	UserAgent string `json:"userAgent,omitempty"`
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// Fault is the fault that shaped the answer, if any.
	Fault FaultKind `json:"fault,omitempty"`
	// Reload is what a PUT /bare-metal-devices/{id} asked for, if it could be read.
	Reload *ReloadCall `json:"reload,omitempty"`
	// Tags is the list a PUT /device/{id}/tags sent (empty, not nil, for a clear), nil for other requests.
	Tags []string `json:"tags"`
	// PowerAction is the action of a POST /device/{id}/power.
	PowerAction PowerAction `json:"powerAction,omitempty"`
	// Previous is, for a tag write (a PUT /device/{id}/tags or a reload PUT that was accepted), the write it
	// replaced: the device's latest tag write at that moment, visible or still delayed by delayed_tag_writes.
	Previous *PreviousWrite `json:"previous,omitempty"`
}

// PreviousWrite is a device's latest tag write as a new write found it.
type PreviousWrite struct {
	// Tags is the list that write sent.
	Tags []string `json:"tags"`
	// Seq is the request that made it; 0 for the tags the device was seeded or restored with.
	Seq int64 `json:"seq,omitempty"`
	// Time is when it was applied (for seeded tags, when the device was seeded or restored).
	Time time.Time `json:"time"`
	// UserAgent and KeyID are those of the request that made it; empty for seeded tags.
	UserAgent string `json:"userAgent,omitempty"`
	KeyID     string `json:"keyId,omitempty"`
}

func (p PreviousWrite) clone() PreviousWrite {
	p.Tags = cloneTags(p.Tags)
	return p
}

// ReloadCall is the body of a reload PUT and what became of it.
type ReloadCall struct {
	Hostname       string   `json:"hostname"`
	OSName         string   `json:"osName"`
	Tags           []string `json:"tags"`
	Script         string   `json:"script,omitempty"`
	PublicSSHKeyID int32    `json:"publicSshKeyId,omitempty"`
	ForceReload    bool     `json:"forceReload,omitempty"`
	SkipPowerCheck bool     `json:"skipPowerCheck,omitempty"`
	// Started reports whether a reload was accepted: it began at once or, under reload_start_lag, begins at
	// BeginsAt. It is false for refused PUTs and for PUTs that changed nothing without forceReload, which only
	// replace the tags.
	Started bool `json:"started"`
	// BeginsAt is when an accepted reload begins (the device goes OFF and reports isReload); later than the
	// request's Time only under reload_start_lag.
	BeginsAt time.Time `json:"beginsAt,omitzero"`
	// Restart reports that the reload replaced one running or in its start lag (concurrent_reload_accepted).
	Restart bool `json:"restart,omitempty"`
}

func (r Request) clone() Request {
	if r.Reload != nil {
		rc := *r.Reload
		rc.Tags = slices.Clone(rc.Tags)
		r.Reload = &rc
	}
	if r.Tags != nil {
		r.Tags = slices.Clone(r.Tags)
	}
	if r.Previous != nil {
		p := r.Previous.clone()
		r.Previous = &p
	}
	return r
}

// Requests returns a copy of the request log, oldest first.
func (s *Simulator) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i := range s.requests {
		out[i] = s.requests[i].clone()
	}
	return out
}

// RequestsFor returns a copy of the logged requests that name device id (0: requests that name no device), oldest
// first.
func (s *Simulator) RequestsFor(id int32) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for i := range s.requests {
		if r := &s.requests[i]; r.DeviceID == id {
			out = append(out, r.clone())
		}
	}
	return out
}

// ResetRequests empties the request log.
func (s *Simulator) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// nextSeq numbers a request about to be applied. Callers hold s.mu until they record it, so that log order is the
// order in which requests were applied.
func (s *Simulator) nextSeq() int64 {
	s.seq++
	return s.seq
}

// record appends r, numbered by nextSeq, to the log. Callers hold s.mu.
func (s *Simulator) record(r Request) {
	s.requests = append(s.requests, r)
}
