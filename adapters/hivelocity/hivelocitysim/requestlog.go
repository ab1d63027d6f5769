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

// Request is one API request (admin requests are not logged), recorded when it was answered.
type Request struct {
	// Seq numbers requests from 1 in the order they were answered; it keeps counting across ResetRequests.
	Seq    int64     `json:"seq"`
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
	// Started reports whether a reload started (false for refused PUTs and for PUTs that changed nothing without
	// forceReload, which only replace the tags).
	Started bool `json:"started"`
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

// record appends r to the log, numbering it. Callers hold s.mu.
func (s *Simulator) record(r Request) {
	s.seq++
	r.Seq = s.seq
	s.requests = append(s.requests, r)
}
