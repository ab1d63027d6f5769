package cincinnatisim

import (
	"net/http"
	"time"
)

// PublishRequest is the body of POST /admin/publish and POST /admin/remove (payload is ignored by remove).
type PublishRequest struct {
	Channel string `json:"channel"`
	Arch    string `json:"arch"`
	Version string `json:"version"`
	Payload string `json:"payload,omitempty"`
}

// EdgeRequest is the body of POST /admin/conditional-edge and POST /admin/remove-edge (risks are ignored by
// remove-edge).
type EdgeRequest struct {
	Channel string `json:"channel"`
	Arch    string `json:"arch"`
	From    string `json:"from"`
	To      string `json:"to"`
	Risks   []Risk `json:"risks,omitempty"`
}

// FaultRequest is the body of POST /admin/fault.
type FaultRequest struct {
	Kind      FaultKind `json:"kind"`
	LatencyMS int       `json:"latency_ms,omitempty"`
	Count     int       `json:"count,omitempty"`
}

// record journals an admin change when the simulator keeps a journal. A change it cannot journal is still
// served, but answered 500 so that the caller knows a restart would lose it.
func (s *Simulator) record(w http.ResponseWriter, e JournalEntry) bool {
	if s.journal == nil {
		return true
	}
	if err := s.journal.Record(e); err != nil {
		s.logger.Error("journal write failed", "op", e.Op, "version", e.Version, "from", e.From, "to", e.To, "error", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{KindUpstreamFetch, "served, but not journalled: " + err.Error()})
		return false
	}
	return true
}

// AdminHandler returns the admin endpoints, for the binary and for tests that drive the simulator over HTTP:
//
//	POST   /admin/publish  PublishRequest → 204 (Publish; journalled WithJournal)
//	POST   /admin/remove   PublishRequest → 204, or 404 if the release was absent (Remove, a pulled release;
//	                                      journalled WithJournal)
//	POST   /admin/conditional-edge EdgeRequest → 204, 400 if a release is missing or a risk incomplete
//	                                      (AddConditionalEdge; journalled WithJournal)
//	POST   /admin/remove-edge EdgeRequest → 204, or 404 if there was no such edge (RemoveEdge; journalled WithJournal)
//	POST   /admin/fault    FaultRequest   → 204 (SetFault)
//	DELETE /admin/fault                   → 204 (ClearFaults)
//	GET    /admin/requests                → {"requests": n} (Requests)
//
// Invalid bodies get 400 with a {kind,value} body; a change the journal could not record gets 500 (it is served).
func (s *Simulator) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/publish", func(w http.ResponseWriter, r *http.Request) {
		var req PublishRequest
		if err := readJSON(r, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, err.Error()})
			return
		}
		if err := s.Publish(req.Channel, req.Arch, req.Version, req.Payload); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, err.Error()})
			return
		}
		if !s.record(w, JournalEntry{Op: OpPublish, PublishRequest: req}) {
			return
		}
		s.logger.Info("published release", "channel", req.Channel, "arch", req.Arch, "version", req.Version)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/remove", func(w http.ResponseWriter, r *http.Request) {
		var req PublishRequest
		if err := readJSON(r, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, err.Error()})
			return
		}
		if !s.Remove(req.Channel, req.Arch, req.Version) {
			writeJSON(w, http.StatusNotFound, errorBody{KindInvalidParams, "release not found"})
			return
		}
		if !s.record(w, JournalEntry{Op: OpRemove, PublishRequest: req}) {
			return
		}
		s.logger.Info("removed release", "channel", req.Channel, "arch", req.Arch, "version", req.Version)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/conditional-edge", func(w http.ResponseWriter, r *http.Request) {
		var req EdgeRequest
		err := readJSON(r, &req)
		if err == nil {
			err = s.AddConditionalEdge(req.Channel, req.Arch, req.From, req.To, req.Risks)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, err.Error()})
			return
		}
		if !s.record(w, edgeEntry(OpConditionalEdge, req)) {
			return
		}
		s.logger.Info("edge made conditional", "channel", req.Channel, "arch", req.Arch, "from", req.From, "to", req.To, "risks", len(req.Risks))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/remove-edge", func(w http.ResponseWriter, r *http.Request) {
		var req EdgeRequest
		if err := readJSON(r, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, err.Error()})
			return
		}
		if !s.RemoveEdge(req.Channel, req.Arch, req.From, req.To) {
			writeJSON(w, http.StatusNotFound, errorBody{KindInvalidParams, "edge not found"})
			return
		}
		if !s.record(w, edgeEntry(OpRemoveEdge, req)) {
			return
		}
		s.logger.Info("edge removed", "channel", req.Channel, "arch", req.Arch, "from", req.From, "to", req.To)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/fault", func(w http.ResponseWriter, r *http.Request) {
		var req FaultRequest
		err := readJSON(r, &req)
		if err == nil {
			err = s.SetFault(Fault{Kind: req.Kind, Latency: time.Duration(req.LatencyMS) * time.Millisecond, Count: req.Count})
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{KindInvalidParams, err.Error()})
			return
		}
		s.logger.Info("fault set", "kind", req.Kind, "latency_ms", req.LatencyMS, "count", req.Count)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /admin/fault", func(w http.ResponseWriter, _ *http.Request) {
		s.ClearFaults()
		s.logger.Info("faults cleared")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /admin/requests", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int{"requests": s.Requests()})
	})
	return mux
}
