package integration

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Three unsharded replicas (each with its own API key and User-Agent, so that the simulator's log tells them
// apart) provision two pools of three from eight eligible devices with the provisioner's default claim settle,
// while every answer takes 0.3–1.2 s, every tag write shows 0.2–1.5 s late, and Hivelocity accepts a second reload
// of a reloading device (as the real API may). The simulator's log shows no device claimed by two pools, none
// reloaded twice for one spec, and no tag write that undid another writer's (see undoneWrites).
func TestHivelocityClaimsAreExactlyOnceAcrossReplicas(t *testing.T) {
	s, c := hvServer(t)
	keys := []string{"replica-a", "replica-b", "replica-c"}
	sim := startHivelocitySim(t, keys...)
	require.NoError(t, sim.Seed(spareDevices(100, 8)...))
	for _, f := range []hivelocitysim.Fault{
		{Kind: hivelocitysim.FaultSlowAnswers, Delay: 300 * time.Millisecond, MaxDelay: 1200 * time.Millisecond},
		{Kind: hivelocitysim.FaultDelayedTagWrites, Delay: 200 * time.Millisecond, MaxDelay: 1500 * time.Millisecond},
		{Kind: hivelocitysim.FaultConcurrentReloadAccepted},
	} {
		require.NoError(t, sim.SetFault(f))
	}
	var adoptAfter time.Duration
	for _, k := range keys {
		o := hvOptions(t, sim, k)
		o.ClaimSettle, o.Timeout = hivelocity.DefaultSettings().ClaimSettle, 10*time.Second
		adoptAfter = o.AdoptAfter()
		startProvisioner(t, s, k, o)
	}
	// The claims are what is tested, not remediation (its own tests have it): with every answer taking up to 1.2 s,
	// a reload watched through a few status reads can pass poolSpec's 3 s on a loaded machine, and a device taken
	// out of its pool is no claim race. A minute is still short of a real pool's timeouts.
	const size = 3
	pools := []*api.NodePool{createHVPool(t, s, c, "alpha", poolSpecTimeouts(size, "#alpha\n", "1m")),
		createHVPool(t, s, c, "beta", poolSpecTimeouts(size, "#beta\n", "1m"))}

	for _, p := range pools {
		waitWithin(t, 3*time.Minute, "pool "+p.Name+" ready", func() bool {
			return conditionIs(poolReport(t, s, p), "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
		})
	}
	// No device is ever in two pools. A pool may hold one device too many for a few seconds: two replicas can claim
	// two spares for one slot at once (one of them from a device list that predates the other's claim), and the
	// later claim yields its slot once settled (step 4 of the claim protocol). So the counts are waited for, and
	// the exactly-once guarantees are read from the simulator's log below.
	byPool := map[string]int{}
	settled := func() bool {
		byPool = map[string]int{}
		for _, d := range sim.Devices() {
			var in []string
			for _, p := range pools {
				if slices.Contains(d.Tags, hivelocity.KeyNodePool+"="+p.Id.String()) {
					in = append(in, p.Name)
				}
			}
			require.LessOrEqual(t, len(in), 1, "device %d is in pools %v", d.ID, in)
			for _, name := range in {
				byPool[name]++
			}
		}
		return byPool["alpha"] == size && byPool["beta"] == size
	}
	for deadline := time.Now().Add(time.Minute); !settled(); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(deadline) {
			logDeviceWrites(t, sim.Requests())
			t.Fatalf("the pools never settled at %d devices each within a minute: %v", size, byPool)
		}
	}
	reqs := sim.Requests()
	// Only the pool that won a device ever asks to reload it (a pool that lost a claim but went on would), and
	// the device is reloaded once for its spec, although Hivelocity would accept a second reload.
	reloadedFor := map[int32]map[string]bool{}
	for _, r := range reqs {
		if r.Op != hivelocitysim.OpReloadDevice || r.Reload == nil {
			continue
		}
		if reloadedFor[r.DeviceID] == nil {
			reloadedFor[r.DeviceID] = map[string]bool{}
		}
		reloadedFor[r.DeviceID][tagOf(r.Reload.Tags, hivelocity.KeyNodePool)] = true
		require.False(t, r.Reload.Restart, "request %d restarted device %d's running reload", r.Seq, r.DeviceID)
	}
	for id, in := range reloadedFor {
		require.Len(t, in, 1, "device %d was reloaded for two pools", id)
	}
	for id, bySpec := range reloadsPerSpec(reqs) {
		for spec, n := range bySpec {
			require.Equal(t, 1, n, "device %d was reloaded %d times for %s", id, n, spec)
		}
	}
	// A claim of another pool can only be written before the claim that won was settled, hence before the
	// winner's reload: one written after it means a pool claimed a device it should have seen owned.
	reloads := startedReloads(sim)
	for _, w := range reqs {
		first, ok := reloads[w.DeviceID]
		if w.Op != hivelocitysim.OpPutTags || !ok || w.Seq < first[0].Seq || tagOf(w.Tags, hivelocity.KeyClaim) == "" {
			continue
		}
		require.Equal(t, tagOf(first[0].Reload.Tags, hivelocity.KeyNodePool), tagOf(w.Tags, hivelocity.KeyNodePool),
			"device %d got another pool's claim (%v) after it was reloaded for its pool", w.DeviceID, w.Tags)
	}
	require.Empty(t, undoneWrites(reqs, hivelocity.DefaultSettings().ClaimSettle, adoptAfter), "tag writes that undid another writer's")
	for _, p := range pools {
		require.Equal(t, size, readyDevices(sim, p.Id.String(), specOf(t, s, p)))
	}
}

// specOf returns the spec hash the provisioner reports for a pool.
func specOf(tb testing.TB, s *apiServer, p *api.NodePool) string {
	tb.Helper()
	st := poolReport(tb, s, p)
	require.NotNil(tb, st)
	spec, _ := st.Data[hivelocity.DataSpec].(string)
	require.NotEmpty(tb, spec)
	return spec
}

// A pool scaled 3 → 0 → 2 wipes and untags what it releases and claims anew; deleting it finalizes only once it
// owns no device, and the node pool then disappears from the API.
func TestHivelocityScalesReleasesAndFinalizes(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 4)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "scale", poolSpec(3, "#cloud-config\n"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	first := owned(sim, p.Id.String())
	require.Len(t, first, 3)

	patchPool(t, s, p, `{"spec":{"replicas":0}}`)
	waitFor(t, "every device released", func() bool { return len(owned(sim, p.Id.String())) == 0 })
	for _, d := range first {
		got, ok := sim.Device(d.ID)
		require.True(t, ok)
		require.Equal(t, 2, got.Reloads, "device %d: provisioned once and wiped once", d.ID)
		require.Empty(t, got.Script, "device %d still has the pool's user data", d.ID)
		require.Zero(t, got.PublicSSHKeyID, "device %d still has the pool's SSH key", d.ID)
		require.Equal(t, fmt.Sprintf("spare-%d.hyperfleet.internal", d.ID), got.Hostname)
		require.ElementsMatch(t, spareDevices(d.ID, 1)[0].Tags, got.Tags, "device %d keeps only the operator's tags", d.ID)
	}
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)

	patchPool(t, s, p, `{"spec":{"replicas":2}}`)
	waitFor(t, "two devices ready again", func() bool { return readyDevices(sim, p.Id.String(), specOf(t, s, p)) == 2 })
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)

	resp, err := s.DeleteNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode(), "body: %s", resp.Body)
	waitFor(t, "the node pool to disappear", func() bool {
		got, err := s.GetNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
		require.NoError(t, err)
		if got.StatusCode() == http.StatusNotFound {
			// Finalized only after the release: nothing may still carry the pool's tags.
			require.Empty(t, owned(sim, p.Id.String()), "the pool disappeared while it still owned devices")
			return true
		}
		return false
	})
	for _, d := range sim.Devices() {
		for _, tag := range d.Tags {
			require.False(t, strings.HasPrefix(tag, hivelocity.TagPrefix), "device %d still has %s", d.ID, tag)
		}
	}
}

// A reload stuck past the pool's timeout is taken out (once Hivelocity lets it be powered off: the simulator, like
// the API, refuses power actions while a reload runs, so the test ends the stuck reload), wiped, marked
// caphv-permanent-error, loses the pool's tags and is replaced, and the pool reports Degraded meanwhile.
func TestHivelocityReplacesAStuckReload(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	// Every reload sticks until one has started; then only that device's does.
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload}))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "stuck", poolSpec(1, "#cloud-config\n"))
	var stuck int32
	waitFor(t, "a reload to start", func() bool {
		for _, d := range sim.Devices() {
			if d.IsReload {
				stuck = d.ID
				return true
			}
		}
		return false
	})
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, DeviceID: stuck}))
	require.True(t, sim.ClearFault(hivelocitysim.FaultStuckReload, 0))

	st := reportSays(t, s, p, "Degraded", api.ConditionStatusTrue, hivelocity.ReasonDeviceRemediated)
	require.Contains(t, deref(condition(st, "Degraded").Message), fmt.Sprintf("device %d", stuck))
	require.True(t, sim.ClearFault(hivelocitysim.FaultStuckReload, stuck))
	waitFor(t, "the stuck device to be marked", func() bool {
		d, _ := sim.Device(stuck)
		return strings.Contains(strings.Join(d.Tags, " "), hivelocity.KeyPermanentError+"=")
	})
	got, _ := sim.Device(stuck)
	require.Contains(t, strings.Join(got.Tags, " "), hivelocity.KeyPermanentError+"=reloading-since-")
	for _, tag := range got.Tags {
		require.False(t, strings.HasPrefix(tag, hivelocity.TagPrefix), "the stuck device still has %s", tag)
	}
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	reportSays(t, s, p, "Degraded", api.ConditionStatusFalse, hivelocity.ReasonNoFailures)
	replacement := owned(sim, p.Id.String())
	require.Len(t, replacement, 1)
	require.NotEqual(t, stuck, replacement[0].ID)
}

// A provisioner stopped while its reloads run, and started again, carries them on: no device is reloaded twice
// for the same spec.
func TestHivelocityRestartDoesNotReloadAgain(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	stop := startProvisioner(t, s, "first", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "restart", poolSpec(2, "#cloud-config\n"))
	waitFor(t, "both reloads to run", func() bool {
		n := 0
		for _, d := range sim.Devices() {
			if d.IsReload {
				n++
			}
		}
		return n == 2
	})
	stop()
	startProvisioner(t, s, "second", hvOptions(t, sim, "k"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	reloads := startedReloads(sim)
	require.Len(t, reloads, 2)
	for id, r := range reloads {
		require.Len(t, r, 1, "device %d reloaded again after the restart", id)
	}
}

// A spec change re-provisions the devices one at a time: the simulator never shows more than one of the pool's
// devices down.
func TestHivelocityRollsASpecChangeOneDeviceAtATime(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "roll", poolSpec(3, "#v1\n"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	before := specOf(t, s, p)

	var (
		mu      sync.Mutex
		fewest  = 3
		sampled int
	)
	done := make(chan struct{})
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			up := 0
			for _, d := range owned(sim, p.Id.String()) {
				if !d.IsReload && d.PowerStatus == hivelocitysim.PowerOn && d.PowerTransition == nil {
					up++
				}
			}
			mu.Lock()
			fewest, sampled = min(fewest, up), sampled+1
			mu.Unlock()
		}
	}()
	patchPool(t, s, p, `{"spec":{"platform":{"hivelocity":{"userdata":"#v2\n"}}}}`)
	waitFor(t, "every device on the new spec", func() bool {
		st := poolReport(t, s, p)
		spec, _ := st.Data[hivelocity.DataSpec].(string)
		return spec != before && readyDevices(sim, p.Id.String(), spec) == 3
	})
	close(done)
	<-sampler
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, sampled)
	require.GreaterOrEqual(t, fewest, 2, "more than one device was down at once")
	for id, r := range startedReloads(sim) {
		require.Len(t, r, 2, "device %d: provisioned, then re-provisioned once", id)
		require.Equal(t, "#v2\n", r[1].Reload.Script)
	}
}

// A storm of 429s pauses every call until X-RateLimit-Reset, the token bucket keeps the provisioner under its
// budget throughout, and the pool gets its devices once the storm is over.
func TestHivelocityRidesOutARateLimitStorm(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	o := hvOptions(t, sim, "k")
	const rps, burst = 20, 5
	o.RPS, o.Burst = rps, burst
	startProvisioner(t, s, "r", o)
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultRateLimitStorm, For: 2 * time.Second}))
	p := createHVPool(t, s, c, "storm", poolSpec(2, "#cloud-config\n"))
	reportSays(t, s, p, "HivelocityAPIReachable", api.ConditionStatusFalse, hivelocity.ReasonRateLimited)
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	reportSays(t, s, p, "HivelocityAPIReachable", api.ConditionStatusTrue, hivelocity.ReasonReachable)

	log := sim.Requests()
	limited := 0
	for i, r := range log {
		if r.Status == http.StatusTooManyRequests {
			limited++
		}
		// A token bucket allows at most burst + rps·T requests in any window of T.
		n := 0
		for _, later := range log[i:] {
			if later.Time.Sub(r.Time) >= time.Second {
				break
			}
			n++
		}
		require.LessOrEqual(t, n, rps+burst, "%d requests within a second of request %d", n, r.Seq)
	}
	// The first 429 pauses every call until the storm's end: only requests already on their way meet it (a pass
	// sends at most ClaimConcurrency, 8, at once).
	t.Logf("%d requests, %d answered 429", len(log), limited)
	require.Positive(t, limited)
	require.LessOrEqual(t, limited, 8, "the provisioner kept calling into the storm")
}

// A key Hivelocity refuses is reported as CredentialsValid=False; once the key file holds a valid key, the
// provisioner reads it and carries on.
func TestHivelocityReadsARotatedAPIKey(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "new-key")
	require.NoError(t, sim.Seed(spareDevices(100, 1)...))
	o := hvOptions(t, sim, "old-key")
	startProvisioner(t, s, "r", o)
	p := createHVPool(t, s, c, "keys", poolSpec(1, "#cloud-config\n"))
	reportSays(t, s, p, "CredentialsValid", api.ConditionStatusFalse, hivelocity.ReasonUnauthorized)
	require.NoError(t, os.WriteFile(o.APIKeyFile, []byte("new-key\n"), 0o600))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	reportSays(t, s, p, "CredentialsValid", api.ConditionStatusTrue, hivelocity.ReasonKeyAccepted)
}

// A claimed spare is reloaded at once (skipPowerCheck): it serves nobody, so a graceful shutdown would only cost a
// call and a wait. A ready device being re-provisioned is asked to shut down once, and when it ignores that for
// --shutdown-timeout its reload is forced.
func TestHivelocityForcesTheReloadOfADeviceIgnoringShutdown(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 1)...))
	o := hvOptions(t, sim, "k")
	o.ShutdownTimeout = time.Second
	startProvisioner(t, s, "r", o)
	p := createHVPool(t, s, c, "stubborn", poolSpec(1, "#cloud-config\n"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	first := specOf(t, s, p)
	provisioned := sim.RequestsFor(100)
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultIgnoredShutdown}))
	patchPool(t, s, p, `{"spec":{"platform":{"hivelocity":{"userdata":"#cloud-config\nruncmd: [true]\n"}}}}`)
	waitFor(t, "the device re-provisioned", func() bool {
		st := poolReport(t, s, p)
		spec, _ := st.Data[hivelocity.DataSpec].(string)
		return spec != first && readyDevices(sim, p.Id.String(), spec) == 1
	})
	count := func(reqs []hivelocitysim.Request) (shutdowns, reloads, forced int) {
		for _, r := range reqs {
			switch {
			case r.Op == hivelocitysim.OpPostPower && r.PowerAction == hivelocitysim.PowerShutdown:
				shutdowns++
				require.Zero(t, forced, "a shutdown after the forced reload")
			case r.Op == hivelocitysim.OpReloadDevice && r.Reload.Started:
				reloads++
				if r.Reload.SkipPowerCheck {
					forced++
				}
			}
		}
		return shutdowns, reloads, forced
	}
	shutdowns, reloads, forced := count(provisioned)
	require.Equal(t, [3]int{0, 1, 1}, [3]int{shutdowns, reloads, forced}, "the spare: no shutdown, one reload that skips the power check")
	shutdowns, reloads, forced = count(sim.RequestsFor(100)[len(provisioned):])
	require.Equal(t, [3]int{1, 1, 1}, [3]int{shutdowns, reloads, forced}, "the re-provision: asked once, then waited, then forced")
}

// Settled pools cost one shared device list per TTL, whatever their number and size: no call names a device.
func TestHivelocitySettledPoolsOnlyListDevices(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 6)...))
	o := hvOptions(t, sim, "k")
	startProvisioner(t, s, "r", o)
	var pools []*api.NodePool
	for _, name := range []string{"one", "two", "three"} {
		pools = append(pools, createHVPool(t, s, c, name, poolSpec(2, "#cloud-config\n")))
	}
	for _, p := range pools {
		reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
		reportSays(t, s, p, "DevicesReady", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	}
	sim.ResetRequests()
	const window = 2 * time.Second // the pools are re-checked every second (startProvisioner)
	time.Sleep(window)
	log := sim.Requests()
	for _, r := range log {
		require.Equal(t, hivelocitysim.OpListDevices, r.Op, "a settled pool made %s %s", r.Method, r.Path)
	}
	require.NotEmpty(t, log, "the pools were re-checked")
	require.LessOrEqual(t, len(log), int(window/o.ListTTL)+2, "more than one list per TTL")
}
