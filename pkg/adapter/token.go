package adapter

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// tokenFile is a bearer token read from a file and read again when the file changes, as a projected Kubernetes
// service-account token is rotated in place. The file is looked at no more than once per recheck.
type tokenFile struct {
	path    string
	recheck time.Duration
	now     func() time.Time

	mu      sync.Mutex
	token   string
	modTime time.Time
	size    int64
	checked time.Time
}

func newTokenFile(path string) (*tokenFile, error) {
	t := &tokenFile{path: path, recheck: time.Second, now: time.Now}
	if _, err := t.Token(); err != nil {
		return nil, err
	}
	return t, nil
}

// Token returns the current token; an error when the file cannot be read or is empty.
func (t *tokenFile) Token() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && now.Sub(t.checked) < t.recheck {
		return t.token, nil
	}
	t.checked = now
	info, err := os.Stat(t.path)
	if err != nil {
		if t.token != "" {
			return t.token, nil // mid-rotation: keep the old token until the new file appears
		}
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	if t.token != "" && info.ModTime().Equal(t.modTime) && info.Size() == t.size {
		return t.token, nil
	}
	raw, err := os.ReadFile(t.path)
	if err != nil {
		if t.token != "" {
			return t.token, nil // swapped between Stat and ReadFile: the next look will find the new one
		}
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		if t.token != "" {
			return t.token, nil
		}
		return "", fmt.Errorf("bearer token file %s is empty", t.path)
	}
	t.token, t.modTime, t.size = tok, info.ModTime(), info.Size()
	return tok, nil
}

// invalidate makes the next Token read the file.
func (t *tokenFile) invalidate() {
	t.mu.Lock()
	t.checked, t.modTime = time.Time{}, time.Time{}
	t.mu.Unlock()
}
