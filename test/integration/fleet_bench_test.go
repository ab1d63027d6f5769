package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/test/harness"
)

// BenchmarkFleet1000Clusters measures the placement loop at fleet scale: 1,000 clusters created at once over
// HYPERFLEET_BENCH_MANAGEMENT_CLUSTERS real kube-apiservers (default 10) each with its own hypershift-sim, until
// all are Ready; and the applier's memory, measured in a process of its own (Go heap in use, the least of five
// readings a second apart) at rest, after it has built a member per management cluster, and with the whole fleet
// on it. Run it once:
//
//	go test ./test/integration -run '^$' -bench Fleet1000Clusters -benchtime 1x -timeout 40m
func BenchmarkFleet1000Clusters(b *testing.B) {
	const clusters = 1000
	members := 10
	if v := os.Getenv("HYPERFLEET_BENCH_MANAGEMENT_CLUSTERS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "HYPERFLEET_BENCH_MANAGEMENT_CLUSTERS")
		members = n
	}
	applierBin := harness.Build(b, "./cmd/hostedcluster-applier")
	for range b.N {
		w := startPlacementWorld(b)
		started := time.Now()
		for i := range members {
			// A tenth of room to spare: the fleet fits, and the least-used rule still decides where.
			w.addManagementCluster(b, fmt.Sprintf("mc-%02d", i), clusters/members+clusters/members/10+1, false)
		}
		b.Logf("%d kube-apiservers with hypershift-sim started in %s", members, time.Since(started).Round(time.Second))
		// The applier first sees no management cluster at all: its heap at rest.
		for name := range w.members {
			require.NoError(b, os.Rename(w.creds+"/"+name, w.creds+"/"+name+".held"))
		}
		ops := startApplierProcess(b, applierBin, w)
		atRest := heapInUse(b, ops)
		for name := range w.members {
			require.NoError(b, os.Rename(w.creds+"/"+name+".held", w.creds+"/"+name))
		}
		w.waitManagementClustersReady(b)
		withMembers := heapInUse(b, ops)
		w.startPlacer(b)

		start := time.Now()
		w.createClusters(b, "fleet", 0, clusters)
		createdIn := time.Since(start)
		all := w.waitAll(b, 20*time.Minute, "1,000 clusters Ready", clusters, ready)
		readyIn := time.Since(start)
		withFleet := heapInUse(b, ops)
		counts, _ := placedCounts(all)
		spread := slices.Sorted(func(yield func(int) bool) {
			for _, n := range counts {
				if !yield(n) {
					return
				}
			}
		})

		b.ReportMetric(float64(members), "management-clusters")
		b.ReportMetric(createdIn.Seconds(), "s-to-create")
		b.ReportMetric(readyIn.Seconds(), "s-to-all-ready")
		b.ReportMetric(atRest/(1<<20), "applier-MiB-at-rest")
		b.ReportMetric((withMembers-atRest)/float64(members)/(1<<20), "applier-MiB/management-cluster")
		b.ReportMetric((withFleet-withMembers)/clusters/(1<<10), "applier-KiB/hosted-cluster")
		b.Logf("clusters per management cluster, fewest to most: %v", spread)
	}
}

// startApplierProcess runs the applier binary in fleet mode against w and returns its ops address once it is
// ready.
func startApplierProcess(tb testing.TB, bin string, w *placementWorld) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	ops := ln.Addr().String()
	require.NoError(tb, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--api-url", w.api.base, "--management-cluster-credentials", w.creds,
		"--pull-secret-file", w.pull, "--ops-bind-address", ops, "--progress-interval", "1s", "--poll-interval", "1s",
		"--kube-api-qps", "200", "--kube-api-burst", "400")
	cmd.Stdout, cmd.Stderr = nil, nil
	if os.Getenv("HYPERFLEET_TEST_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	require.NoError(tb, cmd.Start())
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	waitWithin(tb, time.Minute, "the applier process ready", func() bool {
		resp, err := http.Get("http://" + ops + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return ops
}

var heapInUseLine = regexp.MustCompile(`(?m)^go_memstats_heap_inuse_bytes(?:\{[^}]*\})? (\S+)$`)

// heapInUse is the least of five readings, a second apart, of the process's Go heap in use: the least is the
// closest to what is live, between collections.
func heapInUse(tb testing.TB, ops string) float64 {
	tb.Helper()
	least := -1.0
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		m := heapInUseLine.FindStringSubmatch(scrape(tb, "http://"+ops+"/metrics"))
		require.Len(tb, m, 2, "no go_memstats_heap_inuse_bytes in the applier's metrics")
		v, err := strconv.ParseFloat(strings.TrimSpace(m[1]), 64)
		require.NoError(tb, err)
		if least < 0 || v < least {
			least = v
		}
	}
	return least
}
