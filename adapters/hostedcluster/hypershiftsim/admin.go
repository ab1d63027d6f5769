package hypershiftsim

import (
	"encoding/json"
	"net/http"
)

// AdminHandler returns the endpoints that change fs while the simulator runs, as the other simulators' /admin
// endpoints do:
//
//	POST   /admin/fail            Failure → 204 (Failures.Set), 400 {"error": …} if it is invalid
//	DELETE /admin/fail[?version=V]        → 204 (Failures.Clear: V, or every failure)
//	GET    /admin/fail                    → 200 {"failures": [Failure…]}
func AdminHandler(fs *Failures) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/fail", func(w http.ResponseWriter, r *http.Request) {
		var f Failure
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		err := dec.Decode(&f)
		if err == nil {
			err = fs.Set(f)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /admin/fail", func(w http.ResponseWriter, r *http.Request) {
		fs.Clear(r.URL.Query().Get("version"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /admin/fail", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string][]Failure{"failures": fs.List()})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away: nobody to tell
	}
}
