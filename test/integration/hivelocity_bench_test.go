package integration

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Settings of BenchmarkHivelocity1000Devices100Pools.
const (
	// benchPools pools of benchPoolSize devices take every one of the fleet's spares.
	benchPools, benchPoolSize = 100, 10
	// benchRPS and benchBurst are the provisioning replica's token bucket: about 55 times the default 0.9 a
	// second, so that some 7,000 calls take a couple of minutes, and still a limit the replica runs into.
	benchRPS, benchBurst = 50.0, 20
	// benchIdleWindow is how long the settled fleet is watched: two and a half re-check intervals, so that the
	// first pass and two re-checks of every pool fall inside it and none at its edge.
	benchIdleWindow = 150 * time.Second
)

// BenchmarkHivelocity1000Devices100Pools measures the provisioner's Hivelocity calls at fleet scale. One replica,
// its token bucket on (benchRPS, benchBurst), provisions 100 pools of ten devices out of 1,000 spares, with the
// simulator at a time scale of 100 (a 10-minute reload takes 6 s) and the provisioner's intervals scaled alike —
// except the claim settle, which guards against tag-write delays the simulator does not scale (5 s, the default).
// It reports the calls until every pool is Ready, per device. Then a fresh replica with the defaults (0.9 calls a
// second, 30 s device list TTL, a re-check of settled pools every minute) watches the settled fleet for
// benchIdleWindow, and it reports that replica's calls per settled pool per hour and its device lists per poll
// (one poll: every settled pool looked at once, each re-check interval). It asserts nothing about time. Run with
//
//	go test ./test/integration/ -run '^$' -bench BenchmarkHivelocity1000Devices100Pools -benchtime 1x -v
func BenchmarkHivelocity1000Devices100Pools(b *testing.B) {
	for range b.N {
		s, c := hvServer(b)
		sim := hivelocitysim.New(hivelocitysim.Options{TimeScale: 100, APIKeys: []string{"k"},
			SSHKeys: []hivelocitysim.SSHKey{{ID: 7, Name: hvSSHKey, PublicKey: "ssh-ed25519 AAAA ops"}}})
		srv := httptest.NewServer(sim.Handler())
		b.Cleanup(srv.Close)
		require.NoError(b, sim.Seed(spareDevices(10000, benchPools*benchPoolSize)...))

		o := hivelocity.DefaultOptions()
		o.URL, o.APIKeyFile, o.RPS, o.Burst = srv.URL, keyFile(b, "k"), benchRPS, benchBurst
		o.ListTTL, o.PollInterval, o.StatusInterval, o.ShutdownTimeout = 300*time.Millisecond, 150*time.Millisecond, 1800*time.Millisecond, 3*time.Second
		stop := startProvisioner(b, s, "bench", o)
		// The remediation timeouts are the defaults (10 and 40 minutes) scaled alike.
		spec := strings.Replace(poolSpec(benchPoolSize, "#cloud-config\n"),
			`"3s","reload_timeout_powered_on":"3s"`, `"6s","reload_timeout_powered_on":"24s"`, 1)
		start := time.Now()
		var pools []*api.NodePool
		for i := range benchPools {
			pools = append(pools, createHVPool(b, s, c, fmt.Sprintf("pool%03d", i), spec))
		}
		waitAllReady(b, s, pools, 10*time.Minute)
		took := time.Since(start)
		provisioning := sim.Requests()
		stop()

		devices := float64(benchPools * benchPoolSize)
		byOp, naming := countCalls(provisioning)
		b.ReportMetric(took.Seconds(), "s/1000-devices")
		b.ReportMetric(float64(len(provisioning))/devices, "calls/device")
		b.ReportMetric(float64(naming)/devices, "device-calls/device")
		b.Logf("%d pools of %d ready in %s with %.0f calls/s (burst %d): %d calls, %.2f per device, %.2f naming a device: %v",
			benchPools, benchPoolSize, took.Round(100*time.Millisecond), benchRPS, benchBurst, len(provisioning),
			float64(len(provisioning))/devices, float64(naming)/devices, byOp)

		idle := hivelocity.DefaultOptions()
		idle.URL, idle.APIKeyFile = srv.URL, o.APIKeyFile
		cfg := runtimeConfig(b, s, hivelocity.Name)
		cfg.Replica = "idle"
		a, err := hivelocity.New(cfg, idle, testLogger())
		require.NoError(b, err)
		sim.ResetRequests()
		idleStart := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), benchIdleWindow)
		require.NoError(b, a.Run(ctx))
		cancel()
		settled := sim.Requests()
		byOp, naming = countCalls(settled)
		perPoolHour := float64(len(settled)) / benchPools / benchIdleWindow.Hours()
		polls := math.Ceil(benchIdleWindow.Seconds() / idle.RecheckAfter.Seconds())
		listsPerPoll := float64(byOp[hivelocitysim.OpListDevices]) / polls
		b.ReportMetric(perPoolHour, "idle-calls/pool/h")
		b.ReportMetric(listsPerPoll, "lists/poll")
		var listsAt []time.Duration
		for _, r := range settled {
			if r.Op == hivelocitysim.OpListDevices {
				listsAt = append(listsAt, r.Time.Sub(idleStart).Round(100*time.Millisecond))
			}
		}
		b.Logf("settled, over %s (%.0f polls, a re-check every %s): %d calls (%d naming a device), %.2f per pool per hour, %.1f device lists per poll (at %v): %v",
			benchIdleWindow, polls, idle.RecheckAfter, len(settled), naming, perPoolHour, listsPerPoll, listsAt, byOp)
	}
}

// waitAllReady waits until every pool reports all its devices ready, reading each pool's report until it does.
func waitAllReady(tb testing.TB, s *apiServer, pools []*api.NodePool, within time.Duration) {
	tb.Helper()
	waiting := slices.Clone(pools)
	deadline := time.Now().Add(within)
	for len(waiting) > 0 {
		waiting = slices.DeleteFunc(waiting, func(p *api.NodePool) bool {
			return conditionIs(poolReport(tb, s, p), "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
		})
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("waited %s: %d pools not ready, e.g. %s", within, len(waiting), waiting[0].Name)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// countCalls counts logged requests by operation, and those naming a device.
func countCalls(reqs []hivelocitysim.Request) (map[hivelocitysim.Operation]int, int) {
	byOp, naming := map[hivelocitysim.Operation]int{}, 0
	for _, r := range reqs {
		byOp[r.Op]++
		if r.DeviceID != 0 {
			naming++
		}
	}
	return byOp, naming
}
