package versionresolver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
)

// countingSource returns a new graph per call, failing the first len(errs) calls with errs in turn, and records
// the calls that reached it.
type countingSource struct {
	mu    sync.Mutex
	errs  []error
	calls []string // "channel/arch"
}

func (s *countingSource) Graph(_ context.Context, channel, arch string) (*cincinnati.Graph, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, channel+"/"+arch)
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	return graphOf(arch, "4.16.3"), nil
}

func (s *countingSource) reached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func TestCachedGraphs(t *testing.T) {
	asks := [][2]string{
		{"stable-4.16", "amd64"},
		{"stable-4.16", "amd64"},
		{"stable-4.17", "amd64"},
		{"stable-4.16", "arm64"},
		{"stable-4.17", "amd64"},
	}
	tests := []struct {
		name string
		ttl  time.Duration
		want []string
	}{
		{
			name: "cached per channel and arch",
			ttl:  time.Hour,
			want: []string{"stable-4.16/amd64", "stable-4.17/amd64", "stable-4.16/arm64"},
		},
		{
			name: "ttl 0 caches nothing",
			ttl:  0,
			want: []string{"stable-4.16/amd64", "stable-4.16/amd64", "stable-4.17/amd64", "stable-4.16/arm64", "stable-4.17/amd64"},
		},
		{
			name: "negative ttl caches nothing",
			ttl:  -time.Second,
			want: []string{"stable-4.16/amd64", "stable-4.16/amd64", "stable-4.17/amd64", "stable-4.16/arm64", "stable-4.17/amd64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source := &countingSource{}
			graphs := NewCachedGraphs(source, tt.ttl)
			for _, ask := range asks {
				g, err := graphs.Graph(t.Context(), ask[0], ask[1])
				require.NoError(t, err)
				// A graph served for the wrong key would resolve a stream to another arch's image.
				require.Equal(t, graphOf(ask[1], "4.16.3"), g)
			}
			require.Equal(t, tt.want, source.reached())
		})
	}
}

func TestCachedGraphsDoesNotCacheErrors(t *testing.T) {
	unavailable := fmt.Errorf("%w: HTTP 503", cincinnati.ErrUnavailable)
	source := &countingSource{errs: []error{unavailable}}
	graphs := NewCachedGraphs(source, time.Hour)

	g, err := graphs.Graph(t.Context(), "stable-4.16", "amd64")
	require.ErrorIs(t, err, cincinnati.ErrUnavailable)
	require.Nil(t, g)

	// Cincinnati is back: the failure must not be served for the rest of the TTL.
	g, err = graphs.Graph(t.Context(), "stable-4.16", "amd64")
	require.NoError(t, err)
	require.Equal(t, graphOf("amd64", "4.16.3"), g)

	_, err = graphs.Graph(t.Context(), "stable-4.16", "amd64")
	require.NoError(t, err)
	require.Equal(t, []string{"stable-4.16/amd64", "stable-4.16/amd64"}, source.reached())
}

// blockingSource holds every call until release is closed.
type blockingSource struct {
	release chan struct{}
	calls   atomic.Int32
	graph   *cincinnati.Graph
}

func (s *blockingSource) Graph(context.Context, string, string) (*cincinnati.Graph, error) {
	s.calls.Add(1)
	<-s.release
	return s.graph, nil
}

func TestCachedGraphsCoalescesConcurrentCalls(t *testing.T) {
	tests := []struct {
		name string
		ttl  time.Duration
	}{
		{name: "cached", ttl: time.Hour},
		// Without a cache, coalescing is all that keeps a re-check wave from hitting Cincinnati once per stream.
		{name: "ttl 0", ttl: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source := &blockingSource{graph: graphOf("amd64", "4.16.3")}
			// Built outside the bubble: the TTL cache starts a goroutine that never exits, which synctest would
			// wait for forever.
			graphs := NewCachedGraphs(source, tt.ttl)

			synctest.Test(t, func(t *testing.T) {
				// Made in the bubble, so that callers blocked on it count as durably blocked for synctest.Wait.
				source.release = make(chan struct{})
				// Released on a failed assertion too: callers left blocked would bury the failure under a deadlock panic.
				release := sync.OnceFunc(func() { close(source.release) })
				defer release()
				const callers = 20
				got := make([]*cincinnati.Graph, callers)
				errs := make([]error, callers)
				var wg sync.WaitGroup
				for i := range callers {
					wg.Go(func() { got[i], errs[i] = graphs.Graph(t.Context(), "stable-4.16", "amd64") })
				}
				// Every caller is now either in the source or waiting for the call in flight.
				synctest.Wait()
				require.EqualValues(t, 1, source.calls.Load())

				release()
				wg.Wait()
				require.EqualValues(t, 1, source.calls.Load())
				for i := range callers {
					require.NoError(t, errs[i])
					require.Same(t, source.graph, got[i])
				}
			})
		})
	}
}
