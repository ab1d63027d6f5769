package server

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// reloading holds a value loaded from a file and loads it again when the file changes (its modification time or
// size), as the TLS certificate is: a JWKS file or an ACL file rotated on disk (a mounted Secret or ConfigMap)
// takes effect without a restart. A file that fails to load, or that is missing while it is being replaced, keeps
// the last good value in use; the failure is logged once per change of the file, not on every request.
type reloading[T any] struct {
	path string
	what string // "JWKS file": names the file in logs
	load func(path string) (T, error)
	log  *slog.Logger

	mu       sync.Mutex
	modified time.Time // of the version last tried, loaded or not
	size     int64
	value    T
}

// newReloading loads path once, so that a bad file stops the server at start rather than at the first request.
func newReloading[T any](path, what string, load func(string) (T, error), log *slog.Logger) (*reloading[T], error) {
	r := &reloading[T]{path: path, what: what, load: load, log: log}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if r.value, err = load(path); err != nil {
		return nil, err
	}
	r.modified, r.size = info.ModTime(), info.Size()
	return r, nil
}

// get returns the value of the file as it is now, or the last good one.
func (r *reloading[T]) get() T {
	info, err := os.Stat(r.path)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || (info.ModTime().Equal(r.modified) && info.Size() == r.size) {
		return r.value
	}
	r.modified, r.size = info.ModTime(), info.Size()
	v, err := r.load(r.path)
	if err != nil {
		r.log.Error("reloading a changed file failed; the version loaded before stays in use", "file", r.what, "path", r.path, "error", err)
		return r.value
	}
	r.value = v
	r.log.Info("reloaded a changed file", "file", r.what, "path", r.path)
	return v
}
