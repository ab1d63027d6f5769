package hivelocitysim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"

	"github.com/hyperfleet/hyperfleet/internal/atomicfile"
)

// ErrInvalidState is returned by Restore and LoadState for a state they cannot accept.
var ErrInvalidState = errors.New("hivelocitysim: invalid state")

// State is what a simulator must keep to be restarted where it stopped: its devices (tags, running reloads and
// power actions, with their absolute end times, so that a reload started before a restart ends when it would have),
// its catalogue and its SSH keys. Faults, rate-limit budgets, API keys and the request log are settings or
// observations of one run and are not part of it.
type State struct {
	Devices  []DeviceState `json:"devices"`
	Products []Product     `json:"products"`
	SSHKeys  []SSHKey      `json:"sshKeys"`
}

// Snapshot returns the simulator's state as of now, devices, products and keys sorted by ID.
func (s *Simulator) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	st := State{Devices: make([]DeviceState, 0, len(s.devices)), Products: []Product{}, SSHKeys: []SSHKey{}}
	for _, id := range slices.Sorted(maps.Keys(s.devices)) {
		d := s.devices[id]
		s.advance(d, now)
		st.Devices = append(st.Devices, d.clone())
	}
	for _, id := range slices.Sorted(maps.Keys(s.products)) {
		st.Products = append(st.Products, s.products[id].clone())
	}
	for _, id := range slices.Sorted(maps.Keys(s.sshKeys)) {
		st.SSHKeys = append(st.SSHKeys, s.sshKeys[id])
	}
	return st
}

// Restore replaces the simulator's devices, products and SSH keys with st's; each device's history starts anew. It returns an error wrapping
// ErrInvalidState, and changes nothing, if a device fails Seed's checks (a device may be restored reloading) or
// an ID appears twice.
func (s *Simulator) Restore(st State) error {
	devices := map[int32]*DeviceState{}
	for i := range st.Devices {
		d := st.Devices[i].clone()
		check := d.Device
		check.SPSStatus = "" // a snapshot may hold a running reload, which Seed refuses
		if err := check.validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidState, err)
		}
		if devices[d.ID] != nil {
			return fmt.Errorf("%w: device %d given twice", ErrInvalidState, d.ID)
		}
		d.Vanished = false // a fault of the run that wrote the state
		devices[d.ID] = &d
	}
	products := map[int32]Product{}
	for _, p := range st.Products {
		if p.ID <= 0 || len(p.OperatingSystems) == 0 {
			return fmt.Errorf("%w: product %d needs a positive id and at least one operating system", ErrInvalidState, p.ID)
		}
		products[p.ID] = p.clone()
	}
	keys := map[int32]SSHKey{}
	for _, k := range st.SSHKeys {
		if k.ID <= 0 || k.Name == "" {
			return fmt.Errorf("%w: ssh key %d needs a positive id and a name", ErrInvalidState, k.ID)
		}
		keys[k.ID] = k
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices, s.products, s.sshKeys = devices, products, keys
	s.journals = map[int32]*journal{}
	now := s.clock.Now()
	for _, d := range devices {
		s.startJournal(d, now)
	}
	s.logger.Info("state restored", "devices", len(devices), "products", len(products), "ssh_keys", len(keys))
	return nil
}

// LoadState reads a state written by a StateFile. It returns an error wrapping fs.ErrNotExist when there is no file, and
// an error wrapping ErrInvalidState when the file does not hold a state.
func LoadState(path string) (State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("hivelocitysim: state: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st State
	if err := dec.Decode(&st); err != nil {
		return State{}, fmt.Errorf("%w: %s: %w", ErrInvalidState, path, err)
	}
	return st, nil
}

// StateFile writes a simulator's state to a file after every change, so that a restarted simulator (LoadState,
// Restore) still knows which devices carry whose tags: a provisioner that claimed a device must find its claim
// again. It is safe for concurrent use.
type StateFile struct {
	path string
	sim  *Simulator

	mu sync.Mutex // one write at a time, each of the latest snapshot
}

// NewStateFile returns a StateFile that writes sim's state to path.
func NewStateFile(path string, sim *Simulator) *StateFile { return &StateFile{path: path, sim: sim} }

// Save writes the simulator's current state to the file: a new file renamed over the old one, so a crash leaves
// one or the other, never a mix.
func (f *StateFile) Save() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := json.MarshalIndent(f.sim.Snapshot(), "", "  ")
	if err != nil {
		return fmt.Errorf("hivelocitysim: state: %w", err)
	}
	if err := atomicfile.WriteFile(f.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("hivelocitysim: state: %w", err)
	}
	return nil
}

// Handler wraps h (the simulator's handler) so that every request that may change state is saved before its
// answer goes out: a client never sees a write acknowledged that a restart would forget. A failed save turns the
// answer into a 500 naming the file.
func (f *StateFile) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		rec := &heldResponse{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		// A refused request (401, 404, 429, …) changed nothing: only a success is worth a new snapshot.
		if rec.status >= http.StatusBadRequest {
			rec.replay(w)
			return
		}
		if err := f.Save(); err != nil {
			f.sim.logger.Error("state not saved", "path", f.path, "error", err)
			adminJSON(w, http.StatusInternalServerError, apiError{Code: http.StatusInternalServerError, Message: err.Error()})
			return
		}
		rec.replay(w)
	})
}

// heldResponse keeps an answer until the state it reports is saved.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }

// replay sends the held answer to w.
func (h *heldResponse) replay(w http.ResponseWriter) {
	maps.Copy(w.Header(), h.header)
	w.WriteHeader(h.status)
	_, _ = w.Write(h.body.Bytes())
}

func (h *heldResponse) WriteHeader(status int) { h.status = status }

func (h *heldResponse) Write(p []byte) (int, error) { return h.body.Write(p) }
