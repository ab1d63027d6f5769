// Package cincinnatisim simulates the Cincinnati (OpenShift update service) graph API for development and tests.
//
// It serves GET /api/upgrades_info/v1/graph?channel=…&arch=… from fixture files and generated release series, lets
// a caller publish or remove releases while it runs, and injects faults (503, latency, truncated JSON, 400).
// Errors use Cincinnati's {"kind","value"} body. All methods are safe for concurrent use.
package cincinnatisim

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// GraphPath is the path of the graph endpoint.
const GraphPath = "/api/upgrades_info/v1/graph"

// Cincinnati error kinds the simulator returns in {"kind","value"} bodies.
const (
	KindMissingParams      = "missing_params"
	KindInvalidParams      = "invalid_params"
	KindInvalidContentType = "invalid_content_type"
	KindUpstreamFetch      = "failed_upstream_fetch"
)

type graphKey struct{ channel, arch string }

// Simulator is an in-process Cincinnati. Build it with New, fill it with AddSeries, LoadFixtures or Publish, and
// serve Handler (or call Start).
type Simulator struct {
	logger  *slog.Logger
	admin   bool
	journal *Journal

	mu     sync.RWMutex
	graphs map[graphKey]*Graph

	faultMu sync.Mutex
	fault   *activeFault

	requests atomic.Int64

	srvMu sync.Mutex
	srv   *httptest.Server
}

// Option configures a Simulator.
type Option func(*Simulator)

// WithLogger sets the logger for request and admin logs. The default discards them.
func WithLogger(l *slog.Logger) Option { return func(s *Simulator) { s.logger = l } }

// WithAdmin mounts the admin endpoints (see AdminHandler) on Handler.
func WithAdmin() Option { return func(s *Simulator) { s.admin = true } }

// WithJournal records every release published or removed through the admin endpoints in j. The caller replays j
// (Journal.Replay) after adding series and fixtures.
func WithJournal(j *Journal) Option { return func(s *Simulator) { s.journal = j } }

// WithGraph serves g on channel and arch. The graph is copied and served as given, even if its edges are out of range,
// so a test can feed a client a malformed graph.
func WithGraph(channel, arch string, g Graph) Option {
	return func(s *Simulator) {
		c := g.clone()
		s.graphs[graphKey{channel, arch}] = &c
	}
}

// New returns an empty simulator; every channel is unknown until a graph is added.
func New(opts ...Option) *Simulator {
	s := &Simulator{
		logger: slog.New(slog.DiscardHandler),
		graphs: map[graphKey]*Graph{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// AddSeries generates the series' graphs (see Series) and serves them, replacing graphs of the same channel and
// arch. It returns an error wrapping ErrInvalidSeries if the series is malformed; nothing is added then.
func (s *Simulator) AddSeries(series Series) error {
	gs, err := series.graphs()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.graphs, gs)
	return nil
}

// LoadFixtures serves every <channel>_<arch>.json graph in dir, replacing graphs of the same channel and arch.
// Other files are ignored. It returns an error wrapping ErrInvalidFixture if the directory cannot be read or a
// fixture is malformed; nothing is added then.
func (s *Simulator) LoadFixtures(dir string) error {
	gs, err := loadFixtures(dir)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.graphs, gs)
	return nil
}

// Publish adds release version with image payload to channel on arch (creating the channel if needed), with edges
// from every older release of the same minor and from the highest GA release of the previous minor. An empty payload
// means PayloadFor(version, arch). Publishing a version already present replaces its payload and keeps its edges.
// It returns an error wrapping ErrInvalidRelease if channel or arch is empty, or ErrInvalidVersion if version is not
// semver.
func (s *Simulator) Publish(channel, arch, version, payload string) error {
	if channel == "" || arch == "" {
		return fmt.Errorf("%w: channel and arch are required", ErrInvalidRelease)
	}
	if _, err := parseVersion(version); err != nil {
		return err
	}
	if payload == "" {
		payload = PayloadFor(version, arch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := graphKey{channel, arch}
	g := s.graphs[key]
	if g == nil {
		g = &Graph{Version: 1, Nodes: []Node{}, Edges: [][2]int{}, ConditionalEdges: []ConditionalEdge{}}
		s.graphs[key] = g
	}
	for i := range g.Nodes {
		if g.Nodes[i].Version == version {
			g.Nodes[i].Payload = payload
			return nil
		}
	}
	g.Nodes = append(g.Nodes, Node{Version: version, Payload: payload, Metadata: map[string]string{
		MetadataChannels:    channel,
		MetadataManifestRef: "sha256:" + digest(version, arch),
	}})
	// Index the nodes that parse (fixtures may hold odd versions); the new node is the last of them.
	to := len(g.Nodes) - 1
	var idx []int
	var vs []semver
	for i, n := range g.Nodes {
		if p, err := parseVersion(n.Version); err == nil {
			idx, vs = append(idx, i), append(vs, p)
		}
	}
	last := len(vs) - 1
	for k := range last {
		if upgradeEdge(vs, k, last) {
			g.Edges = append(g.Edges, [2]int{idx[k], to})
		}
	}
	return nil
}

// Remove deletes version from channel on arch, with its edges and conditional edges: what Cincinnati does when a
// release is pulled. It reports whether the release was present.
func (s *Simulator) Remove(channel, arch, version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.graphs[graphKey{channel, arch}]
	if g == nil {
		return false
	}
	idx := slices.IndexFunc(g.Nodes, func(n Node) bool { return n.Version == version })
	if idx < 0 {
		return false
	}
	g.Nodes = slices.Delete(g.Nodes, idx, idx+1)
	edges := g.Edges[:0]
	for _, e := range g.Edges {
		if e[0] == idx || e[1] == idx {
			continue
		}
		for k := range e {
			if e[k] > idx {
				e[k]--
			}
		}
		edges = append(edges, e)
	}
	g.Edges = edges
	g.dropConditional(func(e Edge) bool { return e.From == version || e.To == version })
	return true
}

// Graph returns a copy of the graph served for channel and arch, and whether there is one.
func (s *Simulator) Graph(channel, arch string) (Graph, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.graphs[graphKey{channel, arch}]
	if g == nil {
		return Graph{}, false
	}
	return g.clone(), true
}

// Channels returns the served channels, sorted.
func (s *Simulator) Channels() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	set := map[string]bool{}
	for k := range s.graphs {
		set[k.channel] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// Requests returns the number of graph requests received so far, including failed and faulted ones.
func (s *Simulator) Requests() int { return int(s.requests.Load()) }

// HealthPath answers 200 while the simulator serves; supervisors probe it.
const HealthPath = "/healthz"

// Handler returns the HTTP handler: the graph endpoint, HealthPath and, with WithAdmin, the admin endpoints.
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(GraphPath, s.serveGraph)
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	if s.admin {
		mux.Handle("/admin/", s.AdminHandler())
	}
	return mux
}

// Start serves Handler on a new loopback httptest server and returns it; the caller closes it (URL also returns its
// address). Calling Start again returns the running server.
func (s *Simulator) Start() *httptest.Server {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv == nil {
		s.srv = httptest.NewServer(s.Handler())
	}
	return s.srv
}

// URL returns the base URL of the server Start created, or "" before Start.
func (s *Simulator) URL() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv == nil {
		return ""
	}
	return s.srv.URL
}

// errorBody is Cincinnati's error response.
type errorBody struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

func (s *Simulator) serveGraph(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	f := s.takeFault()
	s.logger.Debug("graph request", "query", r.URL.RawQuery, "fault", f.Kind)
	switch f.Kind {
	case FaultServerError:
		writeJSON(w, http.StatusServiceUnavailable, errorBody{KindUpstreamFetch, "simulated upstream failure"})
		return
	case FaultBadRequest:
		writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, "simulated bad request"})
		return
	case FaultLatency:
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	default: // none, or a fault that changes the answer below
	}
	status, body := s.graphResponse(r)
	if f.Kind == FaultInvalidJSON {
		status, body = http.StatusOK, body[:len(body)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body) //nolint:gosec // JSON the simulator encoded, served as application/json
}

// graphResponse computes the status and JSON body for a graph request.
func (s *Simulator) graphResponse(r *http.Request) (int, []byte) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return http.StatusMethodNotAllowed, encodeJSON(errorBody{KindInvalidParams, "method " + r.Method + " not allowed"})
	}
	if !acceptsJSON(r.Header.Values("Accept")) {
		return http.StatusNotAcceptable, encodeJSON(errorBody{KindInvalidContentType, "only application/json is served"})
	}
	q := r.URL.Query()
	var missing []string
	for _, p := range []string{"channel", "arch"} {
		if q.Get(p) == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return http.StatusBadRequest, encodeJSON(errorBody{KindMissingParams, "mandatory client parameters missing: " + strings.Join(missing, ", ")})
	}
	channel, arch := q.Get("channel"), q.Get("arch")
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.graphs[graphKey{channel, arch}]
	if g == nil {
		known := false
		for k := range s.graphs {
			known = known || k.channel == channel
		}
		if known {
			return http.StatusBadRequest, encodeJSON(errorBody{KindInvalidParams, fmt.Sprintf("arch %q is not available in channel %q", arch, channel)})
		}
		return http.StatusBadRequest, encodeJSON(errorBody{KindInvalidParams, fmt.Sprintf("unknown channel %q", channel)})
	}
	return http.StatusOK, encodeJSON(g.clone())
}

// acceptsJSON reports whether the Accept header values allow application/json; no header allows anything.
func acceptsJSON(values []string) bool {
	if len(values) == 0 {
		return true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*", "*/*", "":
				return true
			}
		}
	}
	return false
}

// encodeJSON marshals v. Should marshalling fail (a graph added WithGraph holding invalid raw conditional edges), it
// returns a Cincinnati failed_json_out error body instead.
func encodeJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf(`{"kind":"failed_json_out","value":%q}`, err.Error()))
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(encodeJSON(v))
}

// readJSON decodes a small admin request body into v.
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
