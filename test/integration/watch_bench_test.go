package integration

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// BenchmarkWatchStreamsMemory holds 1,000 watch streams open on an API process and reports its resident memory
// per stream. go test ./test/integration -run '^$' -bench WatchStreamsMemory -benchtime 1x
func BenchmarkWatchStreamsMemory(b *testing.B) {
	const streams = 1000
	for b.Loop() {
		// One identity (authentication is off) holds every stream: lift the per-identity bound.
		proc := startAPIProcess(b, harness.NewDatabase(b), "--watches-per-identity", "0")
		base := proc.base[:len(proc.base)-len("/api/hyperfleet/v1")]
		before := proc.residentKiB(b, "VmRSS")
		transport := &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0}
		client := &http.Client{Transport: transport}
		ctx, cancel := context.WithCancel(context.Background())
		var bodies []func()
		for i := range streams {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/hyperfleet/v1/clusters?watch=true", http.NoBody)
			require.NoError(b, err)
			resp, err := client.Do(req)
			require.NoError(b, err, "stream %d", i)
			require.Equal(b, http.StatusOK, resp.StatusCode)
			bodies = append(bodies, func() { _ = resp.Body.Close() })
		}
		time.Sleep(time.Second) // let the streams settle into their wait
		after := proc.residentKiB(b, "VmRSS")
		b.ReportMetric(float64(after-before)/streams, "KiB/stream")
		b.ReportMetric(float64(after)/1024, "MiB-total")
		cancel()
		for _, c := range bodies {
			c()
		}
		transport.CloseIdleConnections()
	}
}

// BenchmarkChangeFeedThroughput writes as fast as 16 clients can (creates, then status reports that change each
// cluster's aggregate) while one watcher follows the feed, and reports the write rate, the events delivered per
// second and the delay from commit to delivery: the feed must keep up with the writes.
// go test ./test/integration -run '^$' -bench ChangeFeedThroughput -benchtime 1x
func BenchmarkChangeFeedThroughput(b *testing.B) {
	const (
		writers  = 16
		duration = 10 * time.Second
	)
	for b.Loop() {
		s := startServer(b)
		w := watch(b, s.base, "/clusters", nil)
		ctx, cancel := context.WithTimeout(context.Background(), duration)
		var writes atomic.Int64
		var wg sync.WaitGroup
		for n := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					c, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: fmt.Sprintf("t%02d-%06d", n, i), Spec: clusterSpec(defaultStream)})
					if err != nil || c.StatusCode() != http.StatusCreated {
						return
					}
					writes.Add(1)
					rep, err := s.PostClusterStatusWithResponse(ctx, c.JSON201.Id, report("applier", 1, time.Now().UTC(), available("True")))
					if err != nil || rep.StatusCode() != http.StatusCreated {
						return
					}
					writes.Add(1)
				}
			}()
		}
		// The watcher is read as it goes, so that its delays are the feed's, not a backlog of the benchmark's.
		var mu sync.Mutex
		var delays []time.Duration
		received := func() int64 {
			mu.Lock()
			defer mu.Unlock()
			return int64(len(delays))
		}
		go func() {
			for e := range w.events {
				mu.Lock()
				delays = append(delays, e.received.Sub(e.Data.Time))
				mu.Unlock()
			}
		}()
		start := time.Now()
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		// Every write is one event here (created; status, as each report makes its cluster Ready).
		want := writes.Load()
		require.Eventually(b, func() bool { return received() >= want }, time.Minute, 10*time.Millisecond,
			"the watcher gets every event")
		drained := time.Since(start)
		mu.Lock()
		sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
		b.ReportMetric(float64(want)/elapsed.Seconds(), "writes/s")
		b.ReportMetric(float64(len(delays))/drained.Seconds(), "events/s")
		b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(delays[len(delays)-1].Microseconds())/1000, "max-ms")
		mu.Unlock()
	}
}
