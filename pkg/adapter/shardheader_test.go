package adapter

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Every request of a runtime replica names its shard, by which the API keeps a rate budget per adapter shard.
func TestRequestsNameTheShard(t *testing.T) {
	var got string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get(api.ShardHeader)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	m := newMetrics(prometheus.NewRegistry(), "test", gauges{queueDepth: func() float64 { return 0 }, cachedReports: func() float64 { return 0 }})
	a, err := newAPI("http://127.0.0.1:1", nil, base, m, api.FormatShard(2, 3))
	require.NoError(t, err)
	resp, err := a.Generated().ListClusters(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "2/3", got)
}
