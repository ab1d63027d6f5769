package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/placement"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// requestCounter counts the API requests of each adapter by method and route (ids replaced by {id}, the query by
// the names of its parameters), at the adapters' HTTP transport.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]map[string]int // adapter → route → requests
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]map[string]int{}} }

// transport wraps base so that the adapter's requests are counted.
func (c *requestCounter) transport(adapterName string, base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts[adapterName] == nil {
			c.counts[adapterName] = map[string]int{}
		}
		c.counts[adapterName][route(req)]++
		c.mu.Unlock()
		return base.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

var uuidInPath = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// route is a request's method, path with ids as {id}, and the names of its query parameters (watch=true shows as
// watch, pending_for as pending_for).
func route(req *http.Request) string {
	r := req.Method + " " + uuidInPath.ReplaceAllString(strings.TrimPrefix(req.URL.Path, api.BasePath), "{id}")
	q := req.URL.Query()
	var names []string
	for k := range q {
		if k == "watch" || k == "pending_for" || k == "search" || k == "statuses" || k == "resync_after" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	if len(names) > 0 {
		r += "?" + strings.Join(names, "&")
	}
	return r
}

// reset forgets every count.
func (c *requestCounter) reset() {
	c.mu.Lock()
	c.counts = map[string]map[string]int{}
	c.mu.Unlock()
}

// table returns the counts as a Markdown table and the total.
func (c *requestCounter) table() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString("| adapter | route | requests |\n|---|---|---|\n")
	total := 0
	adapters := make([]string, 0, len(c.counts))
	for a := range c.counts {
		adapters = append(adapters, a)
	}
	slices.Sort(adapters)
	for _, a := range adapters {
		routes := make([]string, 0, len(c.counts[a]))
		sub := 0
		for r, n := range c.counts[a] {
			routes = append(routes, r)
			sub += n
		}
		slices.Sort(routes)
		for _, r := range routes {
			fmt.Fprintf(&b, "| %s | %s | %d |\n", a, r, c.counts[a][r])
		}
		fmt.Fprintf(&b, "| %s | **all** | **%d** |\n", a, sub)
		total += sub
	}
	fmt.Fprintf(&b, "| **all** | | **%d** |\n", total)
	return b.String(), total
}

// TestClusterLifecycleRequests runs one cluster with a pool of three devices through the whole loop (the version
// resolver, the placer, the applier on a real kube-apiserver with hypershift-sim, the provisioner on
// hivelocity-sim, each on the runtime's defaults) from create to gone, and counts what it cost: the adapters' API
// requests by route, and the Hivelocity calls per device. The counts start once the loop is idle (the management
// cluster reported, the stream resolved), so they are the cluster's own.
func TestClusterLifecycleRequests(t *testing.T) {
	counter := newRequestCounter()
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name},
		"cluster": {placement.Name, hostedcluster.Name}, "nodepool": {hivelocity.Name}, "managementcluster": {hostedcluster.Name}})
	config := func(name string) adapter.Config {
		cfg := adapter.Defaults(name, "127.0.0.1:0")
		cfg.APIURL, cfg.Transport, cfg.DrainTimeout = s.base, counter.transport(name, s.transport), 5*time.Second
		return cfg
	}

	sim := startSim(t, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3})
	ro := versionresolver.DefaultOptions()
	ro.CincinnatiURL, ro.Applier = sim.url(), hostedcluster.Name
	resolver, err := versionresolver.New(config(versionresolver.Name), ro, testLogger())
	require.NoError(t, err)
	runInBackground(t, resolver.Run)

	w := &placementWorld{api: s, sim: sim, creds: t.TempDir(), pull: t.TempDir() + "/pull-secret.json", members: map[string]*placementMember{}}
	require.NoError(t, os.WriteFile(w.pull, []byte(`{"auths":{}}`), 0o600))
	w.startManagementCluster(t, "mc-a", false)
	createMC(t, s, "mc-a", 10, mcOptions{})
	ao := hostedcluster.DefaultOptions()
	ao.CredentialsDir, ao.PullSecretFile = w.creds, w.pull
	applier, err := hostedcluster.NewFleet(config(hostedcluster.Name), ao, testLogger())
	require.NoError(t, err)
	runInBackground(t, applier.Run)
	placer, err := placement.New(config(placement.Name), placement.DefaultOptions(), testLogger())
	require.NoError(t, err)
	runInBackground(t, placer.Run)

	hv, po := countedHivelocity(t)
	provisioner, err := hivelocity.New(config(hivelocity.Name), po, testLogger())
	require.NoError(t, err)
	runInBackground(t, provisioner.Run)

	w.waitManagementClustersReady(t)
	waitWithin(t, time.Minute, "the default stream resolved", func() bool {
		resp, err := s.ListVersionStreamsWithResponse(ctxFor(t), nil)
		require.NoError(t, err)
		for _, vs := range resp.JSON200.Items {
			if vs.Name == defaultStream {
				return vs.Status.Phase == api.ResourceStatusPhaseReady
			}
		}
		return false
	})
	time.Sleep(time.Second) // let the loop go idle
	counter.reset()
	hv.ResetRequests()

	start := time.Now()
	c := createCluster(t, s, "life", nil)
	p := createHVPool(t, s, c, "workers", poolSpec(3, "#cloud-config\n"))
	waitWithin(t, 2*time.Minute, "the cluster and its pool Ready", func() bool {
		cr, err := s.GetClusterWithResponse(ctxFor(t), c.Id)
		require.NoError(t, err)
		pr, err := s.GetNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
		require.NoError(t, err)
		return cr.JSON200.Status.Phase == api.ResourceStatusPhaseReady && pr.JSON200.Status.Phase == api.ResourceStatusPhaseReady
	})
	ready := time.Since(start)
	del, err := s.DeleteClusterWithResponse(ctxFor(t), c.Id)
	require.NoError(t, err)
	require.Less(t, del.StatusCode(), 300, "delete: %s", del.Body)
	waitWithin(t, 2*time.Minute, "the cluster gone", func() bool {
		resp, err := s.GetClusterWithResponse(ctxFor(t), c.Id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
	gone := time.Since(start)
	waitWithin(t, time.Minute, "every device released", func() bool { return len(owned(&hvSim{Simulator: hv}, p.Id.String())) == 0 })

	table, total := counter.table()
	byOp, devices := map[hivelocitysim.Operation]int{}, map[int32]bool{}
	for _, r := range hv.Requests() {
		byOp[r.Op]++
		if r.DeviceID != 0 {
			devices[r.DeviceID] = true
		}
	}
	calls := len(hv.Requests())
	t.Logf("one cluster with a pool of 3: Ready after %s, gone after %s\nAPI requests by the adapters: %d\n%s\n"+
		"Hivelocity: %d calls for %d devices (%.1f a device): %v", ready.Round(10*time.Millisecond), gone.Round(10*time.Millisecond),
		total, table, calls, len(devices), float64(calls)/3, byOp)
}

// TestNodePoolLifecycleRequests is TestClusterLifecycleRequests for the provisioner alone, which needs no
// kube-apiserver: a pool of three devices from create to gone, on the runtime's and the provisioner's defaults
// with Hivelocity at practically no delay.
func TestNodePoolLifecycleRequests(t *testing.T) {
	counter := newRequestCounter()
	s, c := hvServer(t)
	hv, po := countedHivelocity(t)
	cfg := adapter.Defaults(hivelocity.Name, "127.0.0.1:0")
	cfg.APIURL, cfg.Transport, cfg.DrainTimeout = s.base, counter.transport(hivelocity.Name, s.transport), 5*time.Second
	provisioner, err := hivelocity.New(cfg, po, testLogger())
	require.NoError(t, err)
	runInBackground(t, provisioner.Run)
	time.Sleep(time.Second) // let the provisioner list and watch
	counter.reset()

	start := time.Now()
	p := createHVPool(t, s, c, "workers", poolSpec(3, "#cloud-config\n"))
	waitWithin(t, 2*time.Minute, "the pool Ready", func() bool {
		resp, err := s.GetNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
		require.NoError(t, err)
		return resp.JSON200.Status.Phase == api.ResourceStatusPhaseReady
	})
	ready := time.Since(start)
	del, err := s.DeleteNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
	require.NoError(t, err)
	require.Less(t, del.StatusCode(), 300, "delete: %s", del.Body)
	waitWithin(t, 2*time.Minute, "the pool gone", func() bool {
		resp, err := s.GetNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
	gone := time.Since(start)
	require.Empty(t, owned(&hvSim{Simulator: hv}, p.Id.String()), "a device still tagged for the pool")

	table, total := counter.table()
	byOp, byDevice, shared := map[hivelocitysim.Operation]int{}, map[int32][]string{}, map[hivelocitysim.Operation]int{}
	named := 0
	for _, r := range hv.Requests() {
		byOp[r.Op]++
		if r.DeviceID != 0 {
			byDevice[r.DeviceID] = append(byDevice[r.DeviceID], string(r.Op))
			named++
		} else {
			shared[r.Op]++
		}
	}
	calls := len(hv.Requests())
	perOp := make([]string, 0, len(byOp))
	for op, n := range byOp {
		perOp = append(perOp, fmt.Sprintf("%s %.2f", op, float64(n)/3))
	}
	slices.Sort(perOp)
	t.Logf("a pool of 3: Ready after %s, gone after %s\nAPI requests by the provisioner: %d\n%s\n"+
		"Hivelocity: %d calls (%.1f a device): %v\na device by operation: %s\n"+
		"naming a device: %d (%.1f a device); naming none (lists, catalogue, from the provisioner's start on): %d %v\nby device: %v",
		ready.Round(10*time.Millisecond), gone.Round(10*time.Millisecond), total, table, calls, float64(calls)/3, byOp,
		strings.Join(perOp, ", "), named, float64(named)/3, calls-named, shared, byDevice)
}

// countedHivelocity is a Hivelocity at practically no delay with 100 spare devices, and the provisioner's default
// options on it with no rate limit: what the lifecycle counts run on.
func countedHivelocity(t *testing.T) (*hivelocitysim.Simulator, hivelocity.Options) {
	t.Helper()
	hv := hivelocitysim.New(hivelocitysim.Options{TimeScale: 10000, Durations: hvDurations(), APIKeys: []string{"k"},
		SSHKeys: []hivelocitysim.SSHKey{{ID: 7, Name: hvSSHKey, PublicKey: "ssh-ed25519 AAAA ops"}}})
	hvSrv := httptest.NewServer(hv.Handler())
	t.Cleanup(hvSrv.Close)
	require.NoError(t, hv.Seed(spareDevices(100, 3)...))
	po := hivelocity.DefaultOptions()
	po.URL, po.APIKeyFile, po.RPS = hvSrv.URL+"/api/v2", keyFile(t, "k"), 0
	po.ClaimSettle = 400 * time.Millisecond // the settle changes no call, only how long a claim waits
	return hv, po
}
