package hvclient

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// keyFile is the API key read from a file and read again when the file changes (a rotated Kubernetes Secret
// volume), or at once after the API refused the key. The file is looked at no more than once per recheck.
type keyFile struct {
	path    string
	recheck time.Duration

	mu      sync.Mutex
	key     string
	modTime time.Time
	size    int64
	checked time.Time
}

func newKeyFile(path string) (*keyFile, error) {
	k := &keyFile{path: path, recheck: time.Second}
	if _, err := k.Key(); err != nil {
		return nil, err
	}
	return k, nil
}

// Key returns the current key. Once a key was read, a file that is briefly missing, unreadable or empty (in the
// middle of a rotation) keeps the old key; before that, it is an error wrapping ErrUnauthorized.
func (k *keyFile) Key() (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.key != "" && now.Sub(k.checked) < k.recheck {
		return k.key, nil
	}
	k.checked = now
	info, err := os.Stat(k.path)
	if err == nil && k.key != "" && info.ModTime().Equal(k.modTime) && info.Size() == k.size {
		return k.key, nil
	}
	var raw []byte
	if err == nil {
		raw, err = os.ReadFile(k.path)
	}
	key := strings.TrimSpace(string(raw))
	switch {
	case err == nil && key != "":
		k.key, k.modTime, k.size = key, info.ModTime(), info.Size()
		return key, nil
	case k.key != "":
		return k.key, nil
	case err != nil:
		return "", fmt.Errorf("%w: API key file: %w", ErrUnauthorized, err)
	default:
		return "", fmt.Errorf("%w: API key file %s is empty", ErrUnauthorized, k.path)
	}
}

// invalidate makes the next Key read the file: the API refused the key, and a rotated one may be on disk.
func (k *keyFile) invalidate() {
	k.mu.Lock()
	k.checked, k.modTime = time.Time{}, time.Time{}
	k.mu.Unlock()
}
