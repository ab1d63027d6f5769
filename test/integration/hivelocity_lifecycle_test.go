package integration

import (
	"fmt"
	"net/http"
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

// The device lifecycle of the Hivelocity provisioner against the real API and hivelocity-sim: a scale-down is
// Ready only once released, a roll keeps max_unavailable, remediation takes a device out (powered off, wiped,
// marked, replaced under a new host name) at most max_unhealthy at a time, and refusals are reported.

// poolSpecWith is poolSpec with extra top-level fields, e.g. `"max_unavailable":2`.
func poolSpecWith(replicas int, userdata, extra string) string {
	return strings.Replace(poolSpec(replicas, userdata), `{"replicas"`, `{`+extra+`,"replicas"`, 1)
}

// poolPhase returns the node pool's aggregated phase.
func poolPhase(tb testing.TB, s *apiServer, p *api.NodePool) api.ResourceStatusPhase {
	tb.Helper()
	resp, err := s.GetNodePoolWithResponse(ctxFor(tb), p.OwnerReferences.Id, p.Id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200.Status.Phase
}

// hasTag reports whether a device carries a tag with key.
func hasTag(d hivelocitysim.DeviceState, key string) bool {
	return slices.ContainsFunc(d.Tags, func(t string) bool { return strings.HasPrefix(t, key+"=") })
}

// sampler calls fn every few milliseconds until stop is called, and once more then.
func sampler(fn func()) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			fn()
			select {
			case <-done:
				fn()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// The API refuses limits that cannot work and accepts numbers and percentages.
func TestHivelocityLifecycleLimitsAreValidated(t *testing.T) {
	s, c := hvServer(t)
	tests := []struct {
		name   string
		extra  string
		status int
	}{
		{name: "numbers", extra: `"max_unavailable":2,"max_surge":1`, status: http.StatusCreated},
		{name: "percentages", extra: `"max_unavailable":"25%","max_surge":"10%"`, status: http.StatusCreated},
		{name: "both zero", extra: `"max_unavailable":0,"max_surge":"0%"`, status: http.StatusBadRequest},
		{name: "over 100%", extra: `"max_surge":"150%"`, status: http.StatusBadRequest},
		{name: "negative", extra: `"max_unavailable":-1`, status: http.StatusBadRequest},
		{name: "not a percentage", extra: `"max_unavailable":"half"`, status: http.StatusBadRequest},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.CreateNodePoolWithBodyWithResponse(ctxFor(t), c.Id, nil, "application/json",
				strings.NewReader(fmt.Sprintf(`{"name":"limits%d","spec":%s}`, i, poolSpecWith(1, "", tt.extra))))
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode(), "body: %s", resp.Body)
		})
	}
	t.Run("max_unhealthy", func(t *testing.T) {
		spec := strings.Replace(poolSpec(1, ""), `"remediation":{`, `"remediation":{"max_unhealthy":"40%",`, 1)
		createHVPool(t, s, c, "unhealthy", spec)
	})
}

// A pool scaled 5 → 2 while its reloads run turns Ready (the phase `hyperfleet wait --for=phase=Ready` polls)
// only once the released devices are wiped and untagged.
func TestHivelocityScaleDownIsReadyOnlyOnceReleased(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 5)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "shrink", poolSpec(5, "#cloud-config\n"))
	waitFor(t, "reloads to run", func() bool {
		for _, d := range owned(sim, p.Id.String()) {
			if d.IsReload {
				return true
			}
		}
		return false
	})
	patchPool(t, s, p, `{"spec":{"replicas":2}}`)
	sawProgressing := false
	waitWithin(t, time.Minute, "the pool to turn Ready", func() bool {
		phase := poolPhase(t, s, p)
		if phase != api.ResourceStatusPhaseReady {
			sawProgressing = sawProgressing || phase == api.ResourceStatusPhaseProgressing
			return false
		}
		mine := owned(sim, p.Id.String())
		require.Len(t, mine, 2, "Ready while the pool still owns %d devices", len(mine))
		for _, d := range mine {
			require.False(t, d.IsReload, "Ready while device %d reloads", d.ID)
			require.False(t, hasTag(d, hivelocity.KeyRelease), "Ready while device %d is being released", d.ID)
		}
		return true
	})
	require.True(t, sawProgressing, "the pool was never Progressing while it released")
	require.Equal(t, 2, readyDevices(sim, p.Id.String(), specOf(t, s, p)))
	for _, d := range sim.Devices() {
		if !slices.Contains(d.Tags, hivelocity.KeyNodePool+"="+p.Id.String()) {
			require.Empty(t, d.Script, "released device %d keeps the pool's user data", d.ID)
		}
	}
}

// mostDownAtOnce returns how many of the devices were down (powered off or reloading) at once from `from` on, by
// the simulator's per-device History. Transitions at one instant are applied together before counting.
func mostDownAtOnce(sim *hvSim, ids []int32, from time.Time) int {
	type event struct {
		at   time.Time
		id   int32
		down bool
	}
	var events []event
	for _, id := range ids {
		for _, tr := range sim.History(id) {
			events = append(events, event{at: tr.At, id: id, down: tr.IsReload || tr.PowerStatus != hivelocitysim.PowerOn})
		}
	}
	slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
	down, most := map[int32]bool{}, 0
	for i, e := range events {
		down[e.id] = e.down
		if i+1 < len(events) && events[i+1].at.Equal(e.at) || e.at.Before(from) {
			continue
		}
		n := 0
		for _, d := range down {
			if d {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// A userdata change of a pool of 5 with max_unavailable 2 re-provisions every device, never with more than two of
// them down (powered off or reloading, by the simulator's History) at any moment.
func TestHivelocityRollKeepsMaxUnavailable(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 5)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "roll", poolSpecWith(5, "#v1\n", `"max_unavailable":2`))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	before := specOf(t, s, p)
	var ids []int32
	for _, d := range owned(sim, p.Id.String()) {
		ids = append(ids, d.ID)
	}
	require.Len(t, ids, 5)

	patched := time.Now()
	patchPool(t, s, p, `{"spec":{"platform":{"hivelocity":{"userdata":"#v2\n"}}}}`)
	waitWithin(t, 90*time.Second, "every device on the new spec", func() bool {
		spec := specOf(t, s, p)
		return spec != before && readyDevices(sim, p.Id.String(), spec) == 5 &&
			conditionIs(poolReport(t, s, p), "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	})
	require.Equal(t, 2, mostDownAtOnce(sim, ids, patched), "a roll with max_unavailable 2 must use it, and never exceed it")
	for id, r := range startedReloads(sim) {
		require.Len(t, r, 2, "device %d: provisioned, then re-provisioned once", id)
		require.Equal(t, "#v2\n", r[1].Reload.Script)
	}
}

// takenOut waits for the device to be marked caphv-permanent-error and checks how it got there: it was powered
// off and wiped (a reload without the pool's user data or SSH key, under a spare's host name) before the mark,
// and it carries no tag of the pool.
func takenOut(t *testing.T, sim *hvSim, id int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("device %d to be marked", id), func() bool {
		d, _ := sim.Device(id)
		return hasTag(d, hivelocity.KeyPermanentError)
	})
	d, _ := sim.Device(id)
	for _, tag := range d.Tags {
		require.False(t, strings.HasPrefix(tag, hivelocity.TagPrefix), "device %d keeps %s", id, tag)
	}
	require.Empty(t, d.Script, "device %d keeps the pool's user data", id)
	require.Zero(t, d.PublicSSHKeyID, "device %d keeps the pool's SSH key", id)
	require.Equal(t, fmt.Sprintf("spare-%d.hyperfleet.internal", id), d.Hostname)
	var wiped, marked int64
	for _, r := range sim.RequestsFor(id) {
		switch {
		case r.Op == hivelocitysim.OpReloadDevice && r.Reload != nil && r.Reload.Started && r.Reload.Script == "":
			wiped = r.Seq
		case r.Tags != nil && slices.ContainsFunc(r.Tags, func(t string) bool { return strings.HasPrefix(t, hivelocity.KeyPermanentError+"=") }):
			if marked == 0 {
				marked = r.Seq
			}
		}
	}
	require.NotZero(t, wiped, "device %d was never wiped", id)
	require.Less(t, wiped, marked, "device %d was marked before its wipe", id)
}

// A device stuck reloading is taken out: powered off, wiped, marked, and replaced by a device whose host name
// carries the slot's next generation.
func TestHivelocityTakesOutAStuckDevice(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload}))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "stuck", poolSpec(1, "#cloud-config\n"))
	var stuck hivelocitysim.DeviceState
	waitFor(t, "a reload to start", func() bool {
		for _, d := range sim.Devices() {
			if d.IsReload {
				stuck = d
				return true
			}
		}
		return false
	})
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, DeviceID: stuck.ID}))
	require.True(t, sim.ClearFault(hivelocitysim.FaultStuckReload, 0))
	require.Equal(t, "stuck-0.metal.example.com", stuck.Hostname)

	waitFor(t, "the stuck device to be taken out", func() bool {
		d, _ := sim.Device(stuck.ID)
		return hasTag(d, hivelocity.KeyRemediate)
	})
	st := reportSays(t, s, p, "Degraded", api.ConditionStatusTrue, hivelocity.ReasonDeviceRemediated)
	require.Contains(t, deref(condition(st, "Degraded").Message), fmt.Sprintf("device %d", stuck.ID))
	// Hivelocity refuses power actions while a reload runs: the device waits (with backoff) until the reload
	// ends, here when the fault does.
	require.True(t, sim.ClearFault(hivelocitysim.FaultStuckReload, stuck.ID))
	takenOut(t, sim, stuck.ID)
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	replacement := owned(sim, p.Id.String())
	require.Len(t, replacement, 1)
	require.NotEqual(t, stuck.ID, replacement[0].ID)
	require.Equal(t, "stuck-0-g1.metal.example.com", replacement[0].Hostname, "the replacement has a new host name")
	require.Contains(t, replacement[0].Tags, hivelocity.KeyGen+"=1")
}

// Three devices stuck at once in a pool of 5 with max_unhealthy 1 are taken out one at a time, and the pool says
// so while it holds the others back.
func TestHivelocityRemediatesOneAtATime(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 5)...))
	stuck := []int32{100, 101, 102}
	for _, id := range stuck {
		require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, DeviceID: id}))
	}
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	spec := strings.Replace(poolSpec(5, "#cloud-config\n"), `"remediation":{`, `"remediation":{"max_unhealthy":1,`, 1)
	p := createHVPool(t, s, c, "many", spec)
	waitFor(t, "every spare claimed", func() bool { return len(owned(sim, p.Id.String())) == 5 })
	require.NoError(t, sim.Seed(spareDevices(200, 3)...)) // the replacements

	var mu sync.Mutex
	most := 0
	stopSampling := sampler(func() {
		n := 0
		for _, d := range owned(sim, p.Id.String()) {
			if hasTag(d, hivelocity.KeyRemediate) {
				n++
			}
		}
		mu.Lock()
		most = max(most, n)
		mu.Unlock()
	})
	defer stopSampling()

	waitFor(t, "the pool to say it holds two devices back", func() bool {
		st := poolReport(t, s, p)
		return conditionIs(st, "Degraded", api.ConditionStatusTrue, hivelocity.ReasonRemediationHeldBack) &&
			strings.Contains(deref(condition(st, "Degraded").Message), "2 failed device(s) wait while 1 are being taken out")
	})
	var done []int32
	for len(done) < len(stuck) {
		var current int32
		waitFor(t, "the next stuck device to be taken out", func() bool {
			for _, d := range owned(sim, p.Id.String()) {
				if hasTag(d, hivelocity.KeyRemediate) && !slices.Contains(done, d.ID) {
					current = d.ID
					return true
				}
			}
			return false
		})
		require.Contains(t, stuck, current)
		sim.ClearFault(hivelocitysim.FaultStuckReload, current)
		takenOut(t, sim, current)
		done = append(done, current)
	}
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	stopSampling()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, most, "more than max_unhealthy devices were in remediation at once")
	require.ElementsMatch(t, stuck, done)
}

// A wipe Hivelocity refuses during deletion makes the pool say, within a minute, what blocks its finalization and
// how to force it (Health=False once refused three times); doing what it says lets the deletion complete.
func TestHivelocityRefusedWipeSaysWhatBlocksDeletion(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 1)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "locked", poolSpec(1, "#cloud-config\n"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	id := owned(sim, p.Id.String())[0].ID
	const refusal = "Device is locked by an open support ticket."
	// 409: hvclient takes a 403 for a refused API key, not a refused action.
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Op: hivelocitysim.OpReloadDevice, DeviceID: id,
		Status: http.StatusConflict, Message: refusal}))

	resp, err := s.DeleteNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode(), "body: %s", resp.Body)
	var msg string
	waitWithin(t, time.Minute, "the pool to say why it cannot finalize", func() bool {
		st := poolReport(t, s, p)
		if st == nil || condition(st, hivelocity.ConditionDevicesReady) == nil {
			return false
		}
		msg = deref(condition(st, hivelocity.ConditionDevicesReady).Message)
		return strings.Contains(msg, fmt.Sprintf("device %d: wipe (reload) refused", id)) &&
			conditionIs(st, "Health", api.ConditionStatusFalse, hivelocity.ReasonCallRefused)
	})
	require.Contains(t, msg, refusal)
	require.Contains(t, msg, fmt.Sprintf("remove the %s* tags of device %d by hand", hivelocity.TagPrefix, id))

	// Do what the message says.
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPut, fmt.Sprintf("%s/device/%d/tags", sim.url, id),
		strings.NewReader(`{"tags":["`+strings.Join(spareDevices(id, 1)[0].Tags, `","`)+`"]}`))
	require.NoError(t, err)
	req.Header.Set("X-API-KEY", "k")
	req.Header.Set("Content-Type", "application/json")
	put, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, put.Body.Close())
	require.Equal(t, http.StatusOK, put.StatusCode)
	waitFor(t, "the node pool to disappear", func() bool {
		got, err := s.GetNodePoolWithResponse(ctxFor(t), c.Id, p.Id)
		require.NoError(t, err)
		return got.StatusCode() == http.StatusNotFound
	})
}

// A userdata change of a pool of 3 with max_surge 1 and max_unavailable 0 claims and provisions a fourth device
// first and releases an outdated one only once the new one is ready: the pool never has fewer than 3 devices up,
// nor more than 4 it keeps.
func TestHivelocitySurgeKeepsThePoolServing(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 4)...))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "surge", poolSpecWith(3, "#v1\n", `"max_unavailable":0,"max_surge":1`))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	before := specOf(t, s, p)

	var mu sync.Mutex
	fewestUp, mostKept := 3, 0
	stop := sampler(func() {
		up, kept := 0, 0
		for _, d := range owned(sim, p.Id.String()) {
			if hasTag(d, hivelocity.KeyRelease) {
				continue
			}
			kept++
			if !d.IsReload && d.PowerStatus == hivelocitysim.PowerOn && d.PowerTransition == nil {
				up++
			}
		}
		mu.Lock()
		fewestUp, mostKept = min(fewestUp, up), max(mostKept, kept)
		mu.Unlock()
	})
	defer stop()
	patchPool(t, s, p, `{"spec":{"platform":{"hivelocity":{"userdata":"#v2\n"}}}}`)
	waitWithin(t, 90*time.Second, "every device on the new spec", func() bool {
		spec := specOf(t, s, p)
		return spec != before && readyDevices(sim, p.Id.String(), spec) == 3 &&
			conditionIs(poolReport(t, s, p), "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 3, fewestUp, "the surge took a device down before its replacement was up")
	require.Equal(t, 4, mostKept, "the surge never claimed its extra device, or more")
	require.Len(t, owned(sim, p.Id.String()), 3)
}

// A claim Hivelocity refuses (4xx) is not retried every pass: the spare waits out a per-device backoff, and after
// three refusals in a row the pool reports Health=False naming the device, the call and Hivelocity's message. Once
// Hivelocity accepts the claim, the pool is provisioned.
func TestHivelocityRefusedClaimBacksOffAndEscalates(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 1)...))
	const refusal = "Device is under maintenance."
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Op: hivelocitysim.OpPutTags,
		Status: http.StatusConflict, Message: refusal}))
	startProvisioner(t, s, "r", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "refused", poolSpec(1, "#cloud-config\n"))
	var msg string
	waitWithin(t, time.Minute, "the pool to report the refused claim", func() bool {
		st := poolReport(t, s, p)
		if st == nil || !conditionIs(st, "Health", api.ConditionStatusFalse, hivelocity.ReasonCallRefused) {
			return false
		}
		msg = deref(condition(st, "Health").Message)
		return true
	})
	require.Contains(t, msg, "device 100")
	require.Contains(t, msg, "claim (tag write)")
	require.Contains(t, msg, refusal)
	var puts []time.Time
	for _, r := range sim.RequestsFor(100) {
		if r.Op == hivelocitysim.OpPutTags {
			puts = append(puts, r.Time)
		}
	}
	require.GreaterOrEqual(t, len(puts), 3)
	// Lower bounds only: a busy machine may delay a retry, never hasten it.
	o := hvOptions(t, sim, "k")
	for i := 1; i < len(puts); i++ {
		wait := min(o.RefusalBackoff<<(i-1), o.RefusalBackoffMax)
		require.GreaterOrEqual(t, puts[i].Sub(puts[i-1]), wait, "retry %d came before its backoff ended: %v", i, puts)
	}

	require.True(t, sim.ClearFault(hivelocitysim.FaultRefused, 0))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
}
