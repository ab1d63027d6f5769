package versionresolver

import (
	"context"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
)

// GraphSource returns the update graph of a channel and architecture (cincinnati.Client does).
type GraphSource interface {
	Graph(ctx context.Context, channel, arch string) (*cincinnati.Graph, error)
}

// maxCachedGraphs bounds the cache: every channel group × minor × architecture in use fits many times over.
const maxCachedGraphs = 1024

// CachedGraphs shares graphs between the streams of one channel and architecture: thousands of streams re-checked
// every few minutes cost Cincinnati one request per channel per TTL, and concurrent misses make one request.
// Failures are not cached.
type CachedGraphs struct {
	source GraphSource
	cache  *expirable.LRU[string, *cincinnati.Graph]
	calls  singleflight.Group
}

// NewCachedGraphs caches source's graphs for ttl; a ttl ≤ 0 caches nothing (every call reaches source, still
// coalesced while one is in flight).
func NewCachedGraphs(source GraphSource, ttl time.Duration) *CachedGraphs {
	c := &CachedGraphs{source: source}
	if ttl > 0 {
		c.cache = expirable.NewLRU[string, *cincinnati.Graph](maxCachedGraphs, nil, ttl)
	}
	return c
}

// Graph returns the graph from the cache or from the source. The returned graph is shared: callers must not
// change it.
func (c *CachedGraphs) Graph(ctx context.Context, channel, arch string) (*cincinnati.Graph, error) {
	key := channel + "/" + arch
	if c.cache != nil {
		if g, ok := c.cache.Get(key); ok {
			return g, nil
		}
	}
	v, err, _ := c.calls.Do(key, func() (any, error) {
		// The call is shared, so one caller's cancellation must not fail the others: the client's own timeout
		// bounds it instead.
		g, err := c.source.Graph(context.WithoutCancel(ctx), channel, arch)
		if err == nil && c.cache != nil {
			c.cache.Add(key, g)
		}
		return g, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*cincinnati.Graph), nil
}
