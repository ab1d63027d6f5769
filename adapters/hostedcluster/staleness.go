package hostedcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// staleAfter is how long a watch may keep failing for a reason other than its credentials, its rights or the
// CRD (a dropped connection, a timeout) before its cache counts as stale: the reflector retries such failures
// within seconds, and a blip must not turn every cluster Unknown.
const staleAfter = 30 * time.Second

// ErrCacheStale is the error of a read the applier will not answer from a watch cache that has stopped following
// the management cluster.
var ErrCacheStale = errors.New("the management cluster's watch cache is stale")

// watchHealth follows one informer: a cache whose watch fails goes on answering what it last saw, so the applier
// must know when to stop believing it. It counts as stale from a failure that the reflector cannot get past by
// itself (401: the token expired; 403: RBAC revoked; 404: the CRD is gone), or from any other failure that has
// lasted staleAfter, until the informer has read the management cluster again since the last failure (its last
// synced resource version moved: a list, an event or a bookmark).
type watchHealth struct {
	what   string
	lastRV func() string
	now    func() time.Time

	mu sync.Mutex
	// failing is the first failure since the cache last followed the management cluster; zero when it does.
	failing   time.Time
	lastErr   error
	definite  bool
	rvAtError string
}

func newWatchHealth(what string, informer cache.SharedIndexInformer, now func() time.Time) (*watchHealth, error) {
	h := &watchHealth{what: what, lastRV: informer.LastSyncResourceVersion, now: now}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		h.failed(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("watch errors of %s: %w", what, err)
	}
	return h, nil
}

// failed records a failure of the informer's list or watch. The ends a watch always meets (the server closing it,
// a resource version that expired) are no failure: the reflector resumes or lists again.
func (h *watchHealth) failed(err error) {
	if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing.IsZero() {
		h.failing = h.now()
	}
	h.lastErr, h.rvAtError = err, h.lastRV()
	h.definite = h.definite || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
}

// stale returns why the cache no longer follows the management cluster, or nil.
func (h *watchHealth) stale() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.failing.IsZero():
		return nil
	case h.lastRV() != h.rvAtError:
		h.failing, h.lastErr, h.definite = time.Time{}, nil, false
		return nil
	case !h.definite && h.now().Sub(h.failing) < staleAfter:
		return nil
	}
	return fmt.Errorf("%w: the watch of %s has failed since %s: %w", ErrCacheStale, h.what, h.failing.UTC().Format(time.RFC3339), h.lastErr)
}
