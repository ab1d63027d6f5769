package server

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// reloading holds a value loaded from files and loads it again when one of them changes (its modification time or
// size): a TLS key pair, a JWKS file or an ACL file rotated on disk (a mounted Secret or ConfigMap) takes effect
// without a restart. Files that fail to load, or that are missing while they are being replaced, keep the last good
// value in use; the failure is logged once per change of the files, not on every request, and the next change (the
// key written after its certificate, say) is tried again.
type reloading[T any] struct {
	paths []string
	what  string // "--jwk-cert-file": names the files in logs
	load  func() (T, error)
	log   *slog.Logger

	mu      sync.Mutex
	stamped []fileStamp // of the version last tried, loaded or not
	value   T
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	modified time.Time
	size     int64
}

// newReloading loads the files once, so that a bad file stops the server at start rather than at the first request.
func newReloading[T any](what string, load func() (T, error), log *slog.Logger, paths ...string) (*reloading[T], error) {
	r := &reloading[T]{paths: paths, what: what, load: load, log: log}
	stamped, err := r.stamp()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if r.value, err = load(); err != nil {
		return nil, err
	}
	r.stamped = stamped
	return r, nil
}

func (r *reloading[T]) stamp() ([]fileStamp, error) {
	out := make([]fileStamp, len(r.paths))
	for i, path := range r.paths {
		info, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		out[i] = fileStamp{modified: info.ModTime(), size: info.Size()}
	}
	return out, nil
}

// get returns the value of the files as they are now, or the last good one.
func (r *reloading[T]) get() T {
	stamped, err := r.stamp()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || slices.Equal(stamped, r.stamped) {
		return r.value
	}
	r.stamped = stamped
	v, err := r.load()
	if err != nil {
		r.log.Error("reloading a changed file failed; the version loaded before stays in use", "file", r.what, "paths", r.paths, "error", err)
		return r.value
	}
	r.value = v
	r.log.Info("reloaded a changed file", "file", r.what, "paths", r.paths)
	return v
}
