package hivelocitysim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// apiBasePath is the real API's base path; the simulator serves the API under it as well as at the root.
const apiBasePath = "/api/v2"

// HeaderAPIKey is the header that carries the API key.
const HeaderAPIKey = "X-API-KEY"

// maxBody caps request bodies; cloud-init scripts are the largest thing sent.
const maxBody = 1 << 20

// Messages of error bodies. "Device not found" is what the real API answers (Hivelocity's cloud controller manager
// matches on it); the others are the simulator's wording.
const (
	msgDeviceNotFound  = "Device not found"
	msgUnauthorized    = "Unauthorized: a valid X-API-KEY header is required."
	msgInvalidPayload  = "Input payload validation failed"
	msgAlreadyReload   = "Device is already reloading."
	msgPowerCheck      = "Device must be powered off before a reload; shut it down or pass skipPowerCheck=true."
	msgSSHKeyNotFound  = "Public ssh key not found."
	msgProductNotFound = "Product not found"
	msgURLNotFound     = "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again."
)

// route is one API operation: its method and path pattern, the path parameter holding an id, and its handler.
type route struct {
	op      Operation
	method  string
	pattern string
	param   string
	serve   func(s *Simulator, c *call) answer
}

// notFoundRoute answers every request no route matches.
func notFoundRoute() route {
	return route{op: OpUnknown, serve: func(*Simulator, *call) answer { return jsonError(http.StatusNotFound, msgURLNotFound) }}
}

// apiRoutes returns the operations the simulator serves, as the official client calls them.
func apiRoutes() []route {
	return []route{
		{OpListDevices, http.MethodGet, "/bare-metal-devices/{$}", "", (*Simulator).listDevicesOp},
		{OpGetDevice, http.MethodGet, "/bare-metal-devices/{deviceId}", "deviceId", (*Simulator).getDeviceOp},
		{OpReloadDevice, http.MethodPut, "/bare-metal-devices/{deviceId}", "deviceId", (*Simulator).reloadDeviceOp},
		{OpGetDeviceDump, http.MethodGet, "/device/{deviceId}", "deviceId", (*Simulator).getDeviceDumpOp},
		{OpGetTags, http.MethodGet, "/device/{deviceId}/tags", "deviceId", (*Simulator).getTagsOp},
		{OpPutTags, http.MethodPut, "/device/{deviceId}/tags", "deviceId", (*Simulator).putTagsOp},
		{OpGetPower, http.MethodGet, "/device/{deviceId}/power", "deviceId", (*Simulator).getPowerOp},
		{OpPostPower, http.MethodPost, "/device/{deviceId}/power", "deviceId", (*Simulator).postPowerOp},
		{OpListSSHKeys, http.MethodGet, "/ssh_key/{$}", "", (*Simulator).listSSHKeysOp},
		{OpGetSSHKey, http.MethodGet, "/ssh_key/{sshKeyId}", "sshKeyId", (*Simulator).getSSHKeyOp},
		{OpListOperatingSystems, http.MethodGet, "/product/{productId}/operating-systems", "productId", (*Simulator).listOperatingSystemsOp},
	}
}

// call is one request on its way through the simulator.
type call struct {
	now   time.Time
	id    int32 // the id in the path, if the route has one
	query url.Values
	body  []byte
	entry *Request
}

// answer is a response, computed under s.mu and written after it is released.
type answer struct {
	status      int
	contentType string
	body        []byte
	rate        *rateState
}

func jsonAnswer(status int, v any) answer {
	b, err := json.Marshal(v)
	if err != nil { // the wire types always marshal; keep the contract of a JSON body anyway
		status, b = http.StatusInternalServerError, []byte(`{"code":500,"message":"encoding failed"}`)
	}
	return answer{status: status, contentType: "application/json", body: b}
}

func jsonError(status int, message string) answer {
	return jsonAnswer(status, apiError{Code: status, Message: message})
}

// serveAPI runs one API request: proxy faults, 429 storms, the budget, the API key, refusals, then the operation.
// It logs the request and answers with the rate-limit headers (except for a proxy error page). Under slow_answers
// it waits before applying the request and again before answering, never holding s.mu; a request whose client
// gave up during the first wait is never applied.
func (s *Simulator) serveAPI(w http.ResponseWriter, r *http.Request, rt route) {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, apiBasePath); ok && strings.HasPrefix(rest, "/") {
		path = rest
	}
	key := strings.TrimSpace(r.Header.Get(HeaderAPIKey))
	entry := Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Op: rt.op, KeyID: KeyID(key),
		UserAgent: r.Header.Get("User-Agent")}
	c := &call{query: r.URL.Query(), entry: &entry}
	idOK := true
	if rt.param != "" {
		c.id, idOK = parseID(r.PathValue(rt.param))
		if rt.param == "deviceId" && idOK {
			entry.DeviceID = c.id
		}
	}
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		// A body that cannot be read whole is no body: the operation answers 400, as it does for a missing one.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err == nil {
			c.body = body
		}
	}

	s.mu.Lock()
	lat := s.latencyFor(entry.DeviceID, s.clock.Now())
	s.mu.Unlock()
	if !s.sleep(r.Context(), lat.before) {
		return
	}

	s.mu.Lock()
	c.now = s.clock.Now()
	entry.Seq = s.nextSeq()
	a := s.respond(rt, c, key, idOK)
	entry.Time, entry.Status = c.now, a.status
	s.record(entry)
	s.setHeaders(w.Header(), a.rate, c.now)
	s.mu.Unlock()

	s.logger.Debug("api request", "method", r.Method, "path", path, "op", rt.op, "device_id", entry.DeviceID,
		"key_id", entry.KeyID, "status", a.status, "fault", entry.Fault)
	if !s.sleep(r.Context(), lat.after) {
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// respond computes the answer to c. Callers hold s.mu.
func (s *Simulator) respond(rt route, c *call, key string, idOK bool) answer {
	if f := s.takeRequestFault(FaultServerError, c.entry.DeviceID, c.now); f != nil {
		c.entry.Fault = FaultServerError
		return answer{status: f.Status, contentType: "text/html", body: proxyErrorPage(f.Status, http.StatusText(f.Status))}
	}
	valid := key != "" && s.keys[key]
	bucketKey := anonymousBucket
	if valid {
		bucketKey = KeyID(key)
	}
	if f := s.takeRequestFault(FaultRateLimitStorm, c.entry.DeviceID, c.now); f != nil {
		c.entry.Fault = FaultRateLimitStorm
		st := s.peek(bucketKey, c.now)
		st.remaining = 0
		if !f.expires.IsZero() {
			st.reset = f.expires
		}
		return rateLimited(st)
	}
	st, ok := s.charge(bucketKey, c.now)
	if !ok {
		return rateLimited(st)
	}
	var a answer
	switch {
	case rt.op == OpUnknown:
		a = rt.serve(s, c) // unknown paths are 404 before any authentication, as the real API's router answers
	case !valid:
		a = jsonError(http.StatusUnauthorized, msgUnauthorized)
	case !idOK:
		a = jsonError(http.StatusNotFound, msgURLNotFound) // the real router only matches positive integers
	default:
		if f := s.takeRefusal(rt.op, c.entry.Method, c.entry.DeviceID, c.now); f != nil {
			c.entry.Fault = FaultRefused
			a = jsonError(f.Status, f.Message)
			break
		}
		a = rt.serve(s, c)
	}
	a.rate = st
	return a
}

func rateLimited(st *rateState) answer {
	a := jsonAnswer(http.StatusTooManyRequests, rateLimitedBody{Code: http.StatusTooManyRequests, Description: RateLimitedDescription})
	a.rate = st
	return a
}

// parseID parses a positive int32 path id.
func parseID(v string) (int32, bool) {
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err == nil && n > 0
}

// lookupDevice returns the device c names, advanced to now, or the 404 answer for a missing or vanished one.
func (s *Simulator) lookupDevice(c *call) (*DeviceState, *answer) {
	d := s.devices[c.id]
	if d != nil && s.faultAt(FaultVanishedDevice, d.ID, c.now) != nil {
		c.entry.Fault = FaultVanishedDevice
		d = nil
	}
	if d == nil {
		a := jsonError(http.StatusNotFound, msgDeviceNotFound)
		return nil, &a
	}
	s.advance(d, c.now)
	return d, nil
}

// listDevices returns the API's device list at now: every device not vanished, by ID. Callers hold s.mu.
func (s *Simulator) listDevices(now time.Time) []bareMetalDevice {
	out := []bareMetalDevice{}
	for _, id := range slices.Sorted(maps.Keys(s.devices)) {
		if s.faultAt(FaultVanishedDevice, id, now) != nil {
			continue
		}
		d := s.devices[id]
		s.advance(d, now)
		out = append(out, toBareMetalDevice(d))
	}
	return out
}

func (s *Simulator) listDevicesOp(c *call) answer {
	list, stale := s.staleList(s.listDevices(c.now), c.now)
	if stale {
		c.entry.Fault = FaultStaleList
	}
	return jsonAnswer(http.StatusOK, list)
}

func (s *Simulator) getDeviceOp(c *call) answer {
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	return jsonAnswer(http.StatusOK, toBareMetalDevice(d))
}

// reloadDeviceOp is PUT /bare-metal-devices/{id}. The preconditions, in order: a readable body naming an OS the
// device's product offers, an FQDN hostname and an existing SSH key (400); no reload running or in its start lag
// (409, the simulator's choice: the API documents no status for it; concurrent_reload_accepted lifts it); then a
// PUT that changes nothing and has no forceReload only replaces the tags; otherwise the device must report OFF
// unless skipPowerCheck=true (400, the "powered off check" the API documents for skipPowerCheck), and the reload
// is accepted: it begins at once, or after a reload_start_lag.
func (s *Simulator) reloadDeviceOp(c *call) answer {
	var u bareMetalDeviceUpdate
	if err := decodeBody(c.body, &u); err != nil {
		return jsonError(http.StatusBadRequest, msgInvalidPayload+": "+err.Error())
	}
	skip := false
	if v := c.query.Get("skipPowerCheck"); v != "" {
		var err error
		if skip, err = strconv.ParseBool(v); err != nil {
			return jsonError(http.StatusBadRequest, fmt.Sprintf("skipPowerCheck: %q is not a boolean", v))
		}
	}
	call := &ReloadCall{Hostname: u.Hostname, OSName: u.OSName, Tags: cloneTags(u.Tags), Script: u.Script,
		PublicSSHKeyID: u.PublicSSHKeyID, ForceReload: u.ForceReload, SkipPowerCheck: skip}
	c.entry.Reload = call
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	if msg := s.validateReload(d, u); msg != "" {
		return jsonError(http.StatusBadRequest, msg)
	}
	busy := d.Reload != nil || d.PendingReload != nil
	if busy && s.faultAt(FaultConcurrentReloadAccepted, d.ID, c.now) == nil {
		return jsonError(http.StatusConflict, msgAlreadyReload)
	}
	var fault FaultKind
	if u.ForceReload || u.changes(d) {
		if !skip && d.PowerStatus != PowerOff {
			return jsonError(http.StatusBadRequest, msgPowerCheck)
		}
		call.BeginsAt, fault = s.acceptReload(d, reloadUpdate{osName: u.OSName, hostname: u.Hostname, script: u.Script, sshKeyID: u.PublicSSHKeyID}, c.now)
		call.Started, call.Restart = true, busy
		if busy {
			fault = FaultConcurrentReloadAccepted
		}
	}
	// The fault that shaped the answer most: a delayed tag write, else the reload's own.
	c.entry.Fault = cmp.Or(s.writeTags(d, u.Tags, c), fault)
	out := toBareMetalDevice(d)
	out.Tags = cloneTags(u.Tags) // the write is acknowledged even when a fault delays it
	return jsonAnswer(http.StatusOK, out)
}

// validateReload returns the 400 message for an update the device cannot take, or "".
func (s *Simulator) validateReload(d *DeviceState, u bareMetalDeviceUpdate) string {
	switch {
	case u.OSName == "":
		return msgInvalidPayload + ": osName is required"
	case !s.products[d.ProductID].offers(u.OSName):
		return fmt.Sprintf("Invalid device parameters: operating system %q is not offered for product %d", u.OSName, d.ProductID)
	case !hvclient.ValidHostname(u.Hostname):
		return fmt.Sprintf("Invalid device parameters: hostname %q must be a fully qualified domain name", u.Hostname)
	case u.PublicSSHKeyID != 0 && s.sshKeys[u.PublicSSHKeyID].ID == 0:
		return fmt.Sprintf("Invalid device parameters: public ssh key %d not found", u.PublicSSHKeyID)
	}
	return ""
}

func (s *Simulator) getDeviceDumpOp(c *call) answer {
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	return jsonAnswer(http.StatusOK, toDeviceDump(d))
}

func (s *Simulator) getTagsOp(c *call) answer {
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	return jsonAnswer(http.StatusOK, deviceTag{Tags: cloneTags(d.Tags)})
}

// putTagsOp replaces the device's tags with the body's list (no merge) and answers with the list written.
func (s *Simulator) putTagsOp(c *call) answer {
	var body deviceTag
	if err := decodeBody(c.body, &body); err != nil {
		return jsonError(http.StatusBadRequest, msgInvalidPayload+": "+err.Error())
	}
	c.entry.Tags = cloneTags(body.Tags)
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	c.entry.Fault = s.writeTags(d, body.Tags, c)
	return jsonAnswer(http.StatusOK, deviceTag{Tags: cloneTags(body.Tags)})
}

func (s *Simulator) getPowerOp(c *call) answer {
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	return jsonAnswer(http.StatusOK, devicePower{PowerStatus: d.PowerStatus})
}

// postPowerOp starts a power action and answers 202 with the power state before it.
func (s *Simulator) postPowerOp(c *call) answer {
	action := PowerAction(c.query.Get("action"))
	c.entry.PowerAction = action
	switch action {
	case PowerBoot, PowerReboot, PowerShutdown:
	case "":
		return jsonError(http.StatusBadRequest, msgInvalidPayload+": action is required (boot, reboot or shutdown)")
	default:
		return jsonError(http.StatusBadRequest, fmt.Sprintf("%s: action %q is not boot, reboot or shutdown", msgInvalidPayload, action))
	}
	d, errA := s.lookupDevice(c)
	if errA != nil {
		return *errA
	}
	before := d.PowerStatus
	fault, perr := s.powerAction(d, action, c.now)
	if perr != nil {
		return jsonError(perr.status, perr.message)
	}
	c.entry.Fault = fault
	return jsonAnswer(http.StatusAccepted, devicePower{PowerStatus: before})
}

func (s *Simulator) listSSHKeysOp(*call) answer {
	out := []sshKeyResponse{}
	for _, id := range slices.Sorted(maps.Keys(s.sshKeys)) {
		k := s.sshKeys[id]
		out = append(out, sshKeyResponse{SSHKeyID: k.ID, Name: k.Name, PublicKey: k.PublicKey})
	}
	return jsonAnswer(http.StatusOK, out)
}

func (s *Simulator) getSSHKeyOp(c *call) answer {
	k, ok := s.sshKeys[c.id]
	if !ok {
		return jsonError(http.StatusNotFound, msgSSHKeyNotFound)
	}
	return jsonAnswer(http.StatusOK, sshKeyResponse{SSHKeyID: k.ID, Name: k.Name, PublicKey: k.PublicKey})
}

func (s *Simulator) listOperatingSystemsOp(c *call) answer {
	p, ok := s.products[c.id]
	if !ok {
		return jsonError(http.StatusNotFound, msgProductNotFound)
	}
	return jsonAnswer(http.StatusOK, toOptionDumps(p))
}

// decodeBody decodes a JSON request body; an empty body is an error, unknown fields are ignored as the API does.
func decodeBody(body []byte, v any) error {
	if strings.TrimSpace(string(body)) == "" {
		return fmt.Errorf("a JSON body is required")
	}
	return json.Unmarshal(body, v)
}
