package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// methodCounter counts the requests a client sends, by method; watches are counted apart.
type methodCounter struct {
	base   http.RoundTripper
	mu     sync.Mutex
	counts map[string]int
}

func (m *methodCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Method
	if req.URL.Query().Get("watch") == "true" {
		key = "WATCH"
	}
	m.mu.Lock()
	m.counts[key]++
	m.mu.Unlock()
	return m.base.RoundTrip(req)
}

func (m *methodCounter) snapshot() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

// adapterCounts is what an adapter's metrics say it did: API requests made for its sources (the polls of pending
// and referenced resources), API requests made for reconciles, and reconciles.
type adapterCounts struct {
	sourceRequests, reconcileRequests, reconciles float64
}

func countsOf(tb testing.TB, ops string) adapterCounts {
	tb.Helper()
	var c adapterCounts
	for _, line := range strings.Split(scrape(tb, "http://"+ops+"/metrics"), "\n") {
		value := func() float64 {
			v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			require.NoError(tb, err)
			return v
		}
		switch {
		case strings.HasPrefix(line, "hyperfleet_adapter_api_requests_total{") &&
			(strings.Contains(line, `op="list pending"`) || strings.Contains(line, `op="list referenced"`)):
			c.sourceRequests += value()
		case strings.HasPrefix(line, "hyperfleet_adapter_api_requests_total{"):
			c.reconcileRequests += value()
		case strings.HasPrefix(line, "hyperfleet_adapter_reconciles_total{"):
			c.reconciles += value()
		}
	}
	return c
}

var readyTotal = regexp.MustCompile(`"total":(\d+)`)

// BenchmarkApplier1000Clusters measures the applier over a fleet: 1,000 clusters on one stream created at once
// until all are Ready (hypershift-sim at zero delay), the requests it made per cluster to the management cluster and
// to the API, and what one re-check cycle of the settled fleet costs. Run it once:
//
//	go test ./test/integration -run '^$' -bench Applier1000Clusters -benchtime 1x
func BenchmarkApplier1000Clusters(b *testing.B) {
	const clusters = 1000
	const resync = 20 * time.Second
	for range b.N {
		w := startApplierWorldWithDelay(b, "", 0)
		stream := createStream(b, w.api, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
		waitForReport(b, w.api, *stream, "4.16.2", resolvedTo("4.16.2"))

		counter := &methodCounter{counts: map[string]int{}}
		kube := rest.CopyConfig(w.env.Config)
		kube.QPS, kube.Burst = 500, 1000
		kube.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.base = rt; return counter }
		// The runtime's and the applier's defaults, but for a re-check cycle short enough to measure.
		applier := w.startApplierWith(b, func(c *adapter.Config) {
			c.ResyncAfter, c.PollInterval = resync, 5*time.Second
		}, kube, hostedcluster.DefaultProgressInterval)
		ops := applier.OpsAddr()

		start := time.Now()
		var g errgroup.Group
		g.SetLimit(8)
		var created atomic.Int64
		for i := range clusters {
			g.Go(func() error {
				resp, err := w.api.CreateClusterWithResponse(ctxFor(b), nil, api.ClusterCreate{Name: fmt.Sprintf("fleet-%04d", i), Spec: clusterSpec("ocp-4-16")})
				if err == nil && resp.StatusCode() != http.StatusCreated {
					err = fmt.Errorf("create: %d %s", resp.StatusCode(), resp.Body)
				}
				created.Add(1)
				return err
			})
		}
		require.NoError(b, g.Wait())
		createdIn := time.Since(start)
		deadline := time.Now().Add(10 * time.Minute)
		for {
			resp, err := w.api.http.Get(w.api.base + "/api/hyperfleet/v1/clusters?size=1&fields=id&search=" +
				"status.phase%20%3D%20%27Ready%27")
			require.NoError(b, err)
			m := readyTotal.FindStringSubmatch(readAll(b, resp))
			if len(m) == 2 && m[1] == strconv.Itoa(clusters) {
				break
			}
			require.True(b, time.Now().Before(deadline), "not all clusters Ready within 10 minutes")
			time.Sleep(200 * time.Millisecond)
		}
		readyIn := time.Since(start)
		kubeAtReady, atReady := counter.snapshot(), countsOf(b, ops)

		// One re-check cycle of the settled fleet, and a little more, so that every cluster is re-checked once.
		time.Sleep(resync + 5*time.Second)
		kubeAfter, after := counter.snapshot(), countsOf(b, ops)
		writes := 0
		for _, m := range []string{http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodDelete} {
			writes += kubeAfter[m] - kubeAtReady[m]
		}
		b.ReportMetric(createdIn.Seconds(), "s-to-create")
		b.ReportMetric(readyIn.Seconds(), "s-to-all-ready")
		b.ReportMetric(float64(kubeAtReady[http.MethodPatch])/clusters, "kube-applies/cluster")
		b.ReportMetric(float64(kubeAtReady[http.MethodGet])/clusters, "kube-gets/cluster")
		b.ReportMetric((atReady.sourceRequests+atReady.reconcileRequests)/clusters, "api-requests/cluster")
		b.ReportMetric(atReady.reconciles/clusters, "reconciles/cluster")
		b.ReportMetric(float64(writes), "kube-writes-in-recheck-cycle")
		rechecks := after.reconciles - atReady.reconciles
		b.ReportMetric(rechecks, "rechecks")
		b.ReportMetric((after.reconcileRequests-atReady.reconcileRequests)/rechecks, "api-requests/recheck")
		b.ReportMetric((after.sourceRequests-atReady.sourceRequests)/resync.Seconds(), "source-api-requests/s")
		b.Logf("kube requests by method at Ready: %v; during the re-check cycle: %v", kubeAtReady, kubeAfter)
	}
}
