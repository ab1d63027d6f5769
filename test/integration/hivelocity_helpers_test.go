package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Test fleet: device type, region and the OS the pools ask for (the simulator's products offer "Ubuntu 22.x",
// which the provisioner resolves "Ubuntu 22.04" to).
const (
	hvType   = "s1.small"
	hvRegion = "LAX2"
	hvSSHKey = "ops"
)

// hvSim is a Hivelocity simulator served on loopback at a high time scale.
type hvSim struct {
	*hivelocitysim.Simulator
	url string
}

// hvDurations make a reload take 0.9 s at the tests' time scale of 100 (0.3 s off, 0.6 s installing) and a
// shutdown 0.2 s: still far longer than a tag write takes to show in the tests that delay them (150 ms).
func hvDurations() hivelocitysim.Durations {
	return hivelocitysim.Durations{ReloadPoweredOff: 30 * time.Second, ReloadPoweredOn: time.Minute, Shutdown: 20 * time.Second, Boot: 30 * time.Second}
}

// startHivelocitySim serves a simulator that accepts the keys, with the SSH key hvSSHKey and no devices.
func startHivelocitySim(tb testing.TB, keys ...string) *hvSim {
	tb.Helper()
	sim := hivelocitysim.New(hivelocitysim.Options{TimeScale: 100, Durations: hvDurations(), APIKeys: keys,
		SSHKeys: []hivelocitysim.SSHKey{{ID: 7, Name: hvSSHKey, PublicKey: "ssh-ed25519 AAAA ops"}}})
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(srv.Close)
	return &hvSim{Simulator: sim, url: srv.URL + "/api/v2"}
}

// spareDevices returns n eligible spares from id on, powered on with Ubuntu 20.x, tagged as an operator would,
// plus the extra tags.
func spareDevices(id int32, n int, extra ...string) []hivelocitysim.Device {
	out := make([]hivelocitysim.Device, 0, n)
	for i := range int32(n) { //nolint:gosec // small test counts
		out = append(out, hivelocitysim.Device{ID: id + i, LocationName: hvRegion, ProductID: hivelocitysim.DemoProductWorker,
			OSName: "Ubuntu 20.x", Tags: append([]string{hivelocity.TagUseAllow, hivelocity.LabelPrefix + hivelocity.LabelDeviceType + "=" + hvType, hivelocity.LabelPrefix + "rack=r1"}, extra...)})
	}
	return out
}

// keyFile writes an API key to a file and returns its path.
func keyFile(tb testing.TB, key string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "hivelocity-key")
	require.NoError(tb, os.WriteFile(path, []byte(key+"\n"), 0o600))
	return path
}

// hvOptions are the provisioner's options for tests: fast polls and claims (a settle of 400 ms covers tag writes
// delayed by up to 150 ms) and no request budget.
func hvOptions(tb testing.TB, sim *hvSim, key string) hivelocity.Options {
	tb.Helper()
	o := hivelocity.DefaultOptions()
	o.URL, o.APIKeyFile, o.RPS, o.Burst = sim.url, keyFile(tb, key), 0, 10
	o.ClaimSettle, o.ListTTL, o.PollInterval, o.StatusInterval = 400*time.Millisecond, 150*time.Millisecond, 150*time.Millisecond, 400*time.Millisecond
	o.ShutdownTimeout, o.Timeout = 3*time.Second, 5*time.Second
	o.RefusalBackoff, o.RefusalBackoffMax = 200*time.Millisecond, 2*time.Second
	return o
}

// startProvisioner runs a provisioner replica until the test ends or the returned stop is called.
func startProvisioner(tb testing.TB, s *apiServer, replica string, o hivelocity.Options) (stop func()) {
	tb.Helper()
	_, stop = runProvisioner(tb, s, replica, o)
	return stop
}

// runProvisioner is startProvisioner that also returns the adapter, for its ops listener.
func runProvisioner(tb testing.TB, s *apiServer, replica string, o hivelocity.Options) (*hivelocity.Adapter, func()) {
	tb.Helper()
	cfg := runtimeConfig(tb, s, hivelocity.Name)
	cfg.Replica = replica
	cfg.ResyncAfter = time.Second
	a, err := hivelocity.New(cfg, o, testLogger())
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(tb, <-done)
		}
	}
	tb.Cleanup(stop)
	return a, stop
}

// poolSpec is a pool of replicas devices of the test fleet; the remediation timeouts (3 s powered off, 3 s
// installing) are short enough for a test and well above the simulator's reloads (0.3 s and 0.6 s).
func poolSpec(replicas int, userdata string) string {
	return poolSpecTimeouts(replicas, userdata, "3s")
}

// poolSpecTimeouts is poolSpec with both remediation timeouts reloadTimeout.
func poolSpecTimeouts(replicas int, userdata, reloadTimeout string) string {
	return fmt.Sprintf(`{"replicas":%d,"platform":{"hivelocity":{"device_type":%q,"region":%q,"selector":{"rack":"r1"},
		"ssh_key_name":%q,"userdata":%q}},"remediation":{"reload_timeout_powered_off":%q,"reload_timeout_powered_on":%q}}`,
		replicas, hvType, hvRegion, hvSSHKey, userdata, reloadTimeout, reloadTimeout)
}

// createHVPool creates a node pool from a raw spec.
func createHVPool(tb testing.TB, s *apiServer, c *api.Cluster, name, spec string) *api.NodePool {
	tb.Helper()
	resp, err := s.CreateNodePoolWithBodyWithResponse(ctxFor(tb), c.Id, nil, "application/json",
		strings.NewReader(`{"name":`+fmt.Sprintf("%q", name)+`,"spec":`+spec+`}`))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// patchPool merges patch into a node pool.
func patchPool(tb testing.TB, s *apiServer, p *api.NodePool, patch string) {
	tb.Helper()
	resp, err := s.PatchNodePoolWithBodyWithResponse(ctxFor(tb), p.OwnerReferences.Id, p.Id, nil, "application/merge-patch+json", strings.NewReader(patch))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
}

// poolReport returns the provisioner's report about a pool, or nil.
func poolReport(tb testing.TB, s *apiServer, p *api.NodePool) *api.AdapterStatus {
	tb.Helper()
	resp, err := s.ListNodePoolStatusesWithResponse(ctxFor(tb), p.OwnerReferences.Id, p.Id)
	require.NoError(tb, err)
	if resp.StatusCode() == http.StatusNotFound {
		return nil
	}
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	for _, st := range resp.JSON200.Items {
		if st.Adapter == hivelocity.Name && st.ObservedGeneration > 0 {
			return &st
		}
	}
	return nil
}

// waitFor waits up to 45 s for cond, polling every 25 ms.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	waitWithin(tb, 45*time.Second, what, cond)
}

// owned returns the simulator's devices whose tags name the pool.
func owned(sim *hvSim, poolID string) []hivelocitysim.DeviceState {
	var out []hivelocitysim.DeviceState
	for _, d := range sim.Devices() {
		if slices.Contains(d.Tags, hivelocity.KeyNodePool+"="+poolID) {
			out = append(out, d)
		}
	}
	return out
}

// readyDevices counts the pool's devices that are reloaded with the spec, not reloading and on, by the
// simulator's state.
func readyDevices(sim *hvSim, poolID, spec string) int {
	n := 0
	for _, d := range owned(sim, poolID) {
		if !d.IsReload && d.PowerStatus == hivelocitysim.PowerOn && slices.Contains(d.Tags, hivelocity.KeySpec+"="+spec) {
			n++
		}
	}
	return n
}

// reportSays waits until the pool's report has condition typ with status and reason, and returns the report.
func reportSays(tb testing.TB, s *apiServer, p *api.NodePool, typ string, status api.ConditionStatus, reason string) *api.AdapterStatus {
	tb.Helper()
	var st *api.AdapterStatus
	waitFor(tb, fmt.Sprintf("pool %s: %s=%s/%s", p.Name, typ, status, reason), func() bool {
		st = poolReport(tb, s, p)
		return conditionIs(st, typ, status, reason)
	})
	return st
}

// startedReloads returns, per device, the reload PUTs the simulator started, in order.
func startedReloads(sim *hvSim) map[int32][]hivelocitysim.Request {
	out := map[int32][]hivelocitysim.Request{}
	for _, r := range sim.Requests() {
		if r.Op == hivelocitysim.OpReloadDevice && r.Reload != nil && r.Reload.Started {
			out[r.DeviceID] = append(out[r.DeviceID], r)
		}
	}
	return out
}

// hvServer starts the API with the provisioner as the node pools' required adapter, and a cluster.
func hvServer(tb testing.TB) (*apiServer, *api.Cluster) {
	tb.Helper()
	s := startServerWith(tb, map[string][]string{"nodepool": {hivelocity.Name}})
	return s, createCluster(tb, s, "metal", nil)
}

// The measurement harness: run with
//
//	go test ./test/integration/ -run '^$' -bench BenchmarkHivelocity -benchtime 1x -v
//
// It logs and reports numbers; it asserts nothing about time.

// BenchmarkHivelocityProvision10 provisions a pool of ten with the simulator at a time scale of 100 (a 10-minute
// reload takes 6 s, a shutdown 0.6 s) and the provisioner's defaults scaled alike — except the claim settle,
// which guards against tag-write delays that the simulator does not scale (5 s) — and counts the calls.
func BenchmarkHivelocityProvision10(b *testing.B) {
	for range b.N {
		s, c := hvServer(b)
		sim := hivelocitysim.New(hivelocitysim.Options{TimeScale: 100, APIKeys: []string{"k"},
			SSHKeys: []hivelocitysim.SSHKey{{ID: 7, Name: hvSSHKey, PublicKey: "ssh-ed25519 AAAA ops"}}})
		srv := httptest.NewServer(sim.Handler())
		b.Cleanup(srv.Close)
		require.NoError(b, sim.Seed(spareDevices(100, 10)...))
		o := hivelocity.DefaultOptions()
		o.URL, o.APIKeyFile, o.RPS = srv.URL, keyFile(b, "k"), 0 // the budget is not scaled: leave it out
		o.ListTTL, o.PollInterval, o.StatusInterval, o.ShutdownTimeout = 300*time.Millisecond, 150*time.Millisecond, 1800*time.Millisecond, 3*time.Second
		startProvisioner(b, s, "bench", o)
		start := time.Now()
		p := createHVPool(b, s, c, "bench", strings.Replace(poolSpec(10, "#cloud-config\n"), `"3s","reload_timeout_powered_on":"3s"`, `"6s","reload_timeout_powered_on":"24s"`, 1))
		waitFor(b, "ten devices ready", func() bool {
			return conditionIs(poolReport(b, s, p), "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
		})
		took := time.Since(start)
		byOp, perDevice := map[hivelocitysim.Operation]int{}, 0
		for _, r := range sim.Requests() {
			byOp[r.Op]++
			if r.DeviceID != 0 {
				perDevice++
			}
		}
		total := len(sim.Requests())
		b.ReportMetric(took.Seconds(), "s/10-devices")
		b.ReportMetric(float64(perDevice)/10, "device-calls/device")
		b.ReportMetric(float64(total)/10, "calls/device")
		b.Logf("10 devices ready in %s; %d calls (%.1f per device, %.1f naming a device): %v", took.Round(10*time.Millisecond), total,
			float64(total)/10, float64(perDevice)/10, byOp)
	}
}

// BenchmarkHivelocityIdle100Pools provisions 100 pools of one device quickly, then runs a fresh provisioner with
// the default device list TTL (30 s) and re-check (1 min) over them for two minutes and counts its calls.
func BenchmarkHivelocityIdle100Pools(b *testing.B) {
	const pools, window = 100, 2 * time.Minute
	for range b.N {
		s, c := hvServer(b)
		sim := hivelocitysim.New(hivelocitysim.Options{TimeScale: 1000, APIKeys: []string{"k"},
			SSHKeys: []hivelocitysim.SSHKey{{ID: 7, Name: hvSSHKey, PublicKey: "ssh-ed25519 AAAA ops"}}})
		srv := httptest.NewServer(sim.Handler())
		b.Cleanup(srv.Close)
		require.NoError(b, sim.Seed(spareDevices(1000, pools)...))
		fast := hvOptions(b, &hvSim{Simulator: sim, url: srv.URL}, "k")
		fast.ClaimSettle = 100 * time.Millisecond
		stop := startProvisioner(b, s, "setup", fast)
		var all []*api.NodePool
		for i := range pools {
			all = append(all, createHVPool(b, s, c, fmt.Sprintf("pool%03d", i), poolSpec(1, "#cloud-config\n")))
		}
		for _, p := range all {
			waitFor(b, "pool "+p.Name+" ready", func() bool {
				return conditionIs(poolReport(b, s, p), "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
			})
		}
		stop()

		idle := hivelocity.DefaultOptions()
		idle.URL, idle.APIKeyFile, idle.RPS = srv.URL, fast.APIKeyFile, 0
		cfg := runtimeConfig(b, s, hivelocity.Name)
		cfg.Replica = "idle"
		a, err := hivelocity.New(cfg, idle, testLogger()) // ResyncAfter: the default re-check, a minute
		require.NoError(b, err)
		sim.ResetRequests()
		ctx, cancel := context.WithTimeout(context.Background(), window)
		require.NoError(b, a.Run(ctx))
		cancel()
		byOp := map[hivelocitysim.Operation]int{}
		for _, r := range sim.Requests() {
			byOp[r.Op]++
		}
		perMinute := float64(len(sim.Requests())) / window.Minutes()
		b.ReportMetric(perMinute, "calls/min")
		b.Logf("%d settled pools (%d devices) over %s: %d calls, %.1f a minute: %v", pools, pools, window, len(sim.Requests()), perMinute, byOp)
	}
}

// logDeviceWrites logs, device by device, every request that wrote tags or reloaded, with who sent it and when,
// so that a failed claim test shows how a device came to be where it is.
func logDeviceWrites(tb testing.TB, reqs []hivelocitysim.Request) {
	tb.Helper()
	var b strings.Builder
	byDevice := map[int32][]hivelocitysim.Request{}
	var ids []int32
	for _, r := range reqs {
		if r.DeviceID == 0 || (r.Op != hivelocitysim.OpPutTags && r.Op != hivelocitysim.OpReloadDevice) {
			continue
		}
		if byDevice[r.DeviceID] == nil {
			ids = append(ids, r.DeviceID)
		}
		byDevice[r.DeviceID] = append(byDevice[r.DeviceID], r)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "device %d:\n", id)
		for _, r := range byDevice[id] {
			tags := r.Tags
			started := ""
			if r.Reload != nil {
				tags, started = r.Reload.Tags, fmt.Sprintf(" started=%t", r.Reload.Started)
			}
			prev := int64(-1)
			if r.Previous != nil {
				prev = r.Previous.Seq
			}
			fmt.Fprintf(&b, "  #%d %s %s %s status=%d%s replaced=#%d tags=%v\n", r.Seq, r.Time.Format("15:04:05.000"),
				r.UserAgent, r.Op, r.Status, started, prev, tags)
		}
	}
	tb.Log(b.String())
}
