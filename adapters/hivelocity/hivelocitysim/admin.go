package hivelocitysim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// AdminPrefix is the path prefix of the admin endpoints.
const AdminPrefix = "/_sim/"

// HealthPath answers 200 while the simulator serves, without an API key; supervisors probe it.
const HealthPath = AdminPrefix + "healthz"

// AdminHandler returns the admin endpoints (JSON in and out, no API key, not logged, no rate limit):
//
//	GET    /_sim/healthz                 → {"status": "ok"} while the simulator serves
//	GET    /_sim/state                   → State (Snapshot)
//	GET    /_sim/devices                 → []DeviceState (Devices)
//	POST   /_sim/devices   []Device      → 204 (Seed)
//	GET    /_sim/devices/{id}            → DeviceState, or 404 (Device)
//	GET    /_sim/devices/{id}/history    → []Transition, or 404 (History)
//	GET    /_sim/requests[?deviceId=&op=] → []Request, filtered (Requests)
//	DELETE /_sim/requests                → 204 (ResetRequests)
//	GET    /_sim/faults                  → []Fault (Faults)
//	POST   /_sim/faults    Fault         → 204 (SetFault)
//	DELETE /_sim/faults[?kind=&deviceId=] → 204 (ClearFaults; with kind, ClearFault, 404 if absent)
//	PUT    /_sim/api-keys  {"keys": […]} → 204 (SetAPIKeys)
//	GET    /_sim/time-scale              → {"timeScale": f}
//	PUT    /_sim/time-scale {"timeScale": f} → 204 (SetTimeScale)
//	PUT    /_sim/rate-limit {"limit", "anonymousLimit", "window": "1h", "resetUnix"} → 204 (SetRateLimit)
//	POST   /_sim/ssh-keys  []SSHKey      → 204 (SetSSHKeys)
//	POST   /_sim/products  []Product     → 204 (SetProducts)
//
// Durations in JSON are Go duration strings ("90s"). Invalid requests get 400 with {"code", "message"}.
func (s *Simulator) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		adminJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /_sim/state", func(w http.ResponseWriter, _ *http.Request) {
		adminJSON(w, http.StatusOK, s.Snapshot())
	})
	mux.HandleFunc("GET /_sim/devices", func(w http.ResponseWriter, _ *http.Request) {
		adminJSON(w, http.StatusOK, s.Devices())
	})
	mux.HandleFunc("POST /_sim/devices", func(w http.ResponseWriter, r *http.Request) {
		var devices []Device
		adminDo(w, readAdmin(r, &devices), func() error { return s.Seed(devices...) })
	})
	mux.HandleFunc("GET /_sim/devices/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ok := parseID(r.PathValue("id"))
		d, found := s.Device(id)
		if !ok || !found {
			adminJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: msgDeviceNotFound})
			return
		}
		adminJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("GET /_sim/devices/{id}/history", func(w http.ResponseWriter, r *http.Request) {
		id, ok := parseID(r.PathValue("id"))
		h := s.History(id)
		if !ok || h == nil {
			adminJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: msgDeviceNotFound})
			return
		}
		adminJSON(w, http.StatusOK, h)
	})
	mux.HandleFunc("GET /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var id int32
		if v := q.Get("deviceId"); v != "" {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				adminJSON(w, http.StatusBadRequest, apiError{Code: http.StatusBadRequest, Message: "deviceId: " + err.Error()})
				return
			}
			id = int32(n)
		}
		out := []Request{}
		all := s.Requests()
		for i := range all {
			if req := &all[i]; (id == 0 || req.DeviceID == id) && (q.Get("op") == "" || string(req.Op) == q.Get("op")) {
				out = append(out, *req)
			}
		}
		adminJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("DELETE /_sim/requests", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_sim/faults", func(w http.ResponseWriter, _ *http.Request) {
		out := s.Faults()
		if out == nil {
			out = []Fault{}
		}
		adminJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		adminDo(w, readAdmin(r, &f), func() error { return s.SetFault(f) })
	})
	mux.HandleFunc("DELETE /_sim/faults", s.adminClearFaults)
	mux.HandleFunc("PUT /_sim/api-keys", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Keys []string `json:"keys"`
		}
		adminDo(w, readAdmin(r, &body), func() error {
			s.SetAPIKeys(body.Keys...)
			s.logger.Info("api keys set", "count", len(body.Keys))
			return nil
		})
	})
	mux.HandleFunc("GET /_sim/time-scale", func(w http.ResponseWriter, _ *http.Request) {
		adminJSON(w, http.StatusOK, map[string]float64{"timeScale": s.TimeScale()})
	})
	mux.HandleFunc("PUT /_sim/time-scale", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			TimeScale float64 `json:"timeScale"`
		}
		adminDo(w, readAdmin(r, &body), func() error { return s.SetTimeScale(body.TimeScale) })
	})
	mux.HandleFunc("PUT /_sim/rate-limit", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Limit          int      `json:"limit"`
			AnonymousLimit int      `json:"anonymousLimit"`
			Window         duration `json:"window"`
			ResetUnix      bool     `json:"resetUnix"`
		}
		adminDo(w, readAdmin(r, &body), func() error {
			return s.SetRateLimit(RateLimit{Limit: body.Limit, AnonymousLimit: body.AnonymousLimit,
				Window: time.Duration(body.Window), ResetUnix: body.ResetUnix})
		})
	})
	mux.HandleFunc("POST /_sim/ssh-keys", func(w http.ResponseWriter, r *http.Request) {
		var keys []SSHKey
		adminDo(w, readAdmin(r, &keys), func() error { return s.SetSSHKeys(keys...) })
	})
	mux.HandleFunc("POST /_sim/products", func(w http.ResponseWriter, r *http.Request) {
		var products []Product
		adminDo(w, readAdmin(r, &products), func() error { return s.SetProducts(products...) })
	})
	mux.HandleFunc(AdminPrefix, func(w http.ResponseWriter, _ *http.Request) {
		adminJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: msgURLNotFound})
	})
	return mux
}

func (s *Simulator) adminClearFaults(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("kind") == "" {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var id int64
	if v := q.Get("deviceId"); v != "" {
		var err error
		if id, err = strconv.ParseInt(v, 10, 32); err != nil {
			adminJSON(w, http.StatusBadRequest, apiError{Code: http.StatusBadRequest, Message: "deviceId: " + err.Error()})
			return
		}
	}
	if !s.ClearFault(FaultKind(q.Get("kind")), int32(id)) {
		adminJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "no such fault"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readAdmin decodes a small admin request body into v, refusing unknown fields.
func readAdmin(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid body: %w", err)
	}
	return nil
}

// adminDo answers 400 for a body error or an error of apply, and 204 otherwise.
func adminDo(w http.ResponseWriter, bodyErr error, apply func() error) {
	err := bodyErr
	if err == nil {
		err = apply()
	}
	if err != nil {
		adminJSON(w, http.StatusBadRequest, apiError{Code: http.StatusBadRequest, Message: err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func adminJSON(w http.ResponseWriter, status int, v any) {
	a := jsonAnswer(status, v)
	w.Header().Set("Content-Type", a.contentType)
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// duration is a time.Duration written in JSON as a Go duration string.
type duration time.Duration

// MarshalJSON writes the duration as a string such as "1m30s".
func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"90s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// faultJSON is Fault on the wire, with duration strings.
type faultJSON struct {
	Kind     FaultKind `json:"kind"`
	DeviceID int32     `json:"deviceId,omitempty"`
	For      duration  `json:"for,omitempty"`
	Count    int       `json:"count,omitempty"`
	Status   int       `json:"status,omitempty"`
	Delay    duration  `json:"delay,omitempty"`
	MaxDelay duration  `json:"maxDelay,omitempty"`
	MaxAge   duration  `json:"maxAge,omitempty"`
	Op       Operation `json:"op,omitempty"`
	Message  string    `json:"message,omitempty"`
}

// MarshalJSON writes the fault with Go duration strings ("30s") for For, Delay, MaxDelay and MaxAge.
func (f Fault) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultJSON{f.Kind, f.DeviceID, duration(f.For), f.Count, f.Status, duration(f.Delay),
		duration(f.MaxDelay), duration(f.MaxAge), f.Op, f.Message})
}

// UnmarshalJSON reads a fault written by MarshalJSON; unknown fields are an error.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return err
	}
	*f = Fault{Kind: j.Kind, DeviceID: j.DeviceID, For: time.Duration(j.For), Count: j.Count, Status: j.Status,
		Delay: time.Duration(j.Delay), MaxDelay: time.Duration(j.MaxDelay), MaxAge: time.Duration(j.MaxAge), Op: j.Op,
		Message: j.Message}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
