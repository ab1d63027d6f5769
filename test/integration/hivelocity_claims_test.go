package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// tagOf returns the value of the tag key=value in tags, "" if there is none.
func tagOf(tags []string, key string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, key+"="); ok {
			return v
		}
	}
	return ""
}

// claimTime returns the time of a claim tag's value (<unix ms>-<nonce>).
func claimTime(claim string) time.Time {
	ms, _, _ := strings.Cut(claim, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}

// undoneWrites returns, from a simulator's request log, every tag write that undid another writer's: a write W
// (a tag PUT or an accepted reload, whose Previous is the write it replaced) by one replica (User-Agent) that
// drops the claim another replica's write P carried, unless
//
//   - P was a competing claim still in its settle window: P wrote a new claim and its replica had not yet read
//     it back (no GET /device/{id} of the device by P's replica between P and W applied settle or more after P,
//     when the verify read comes; an earlier read of the device by that replica is another claim's check) — P's
//     claimer then sees W and gives up, as the protocol means it to; or
//   - P's claim was older than adoptAfter when W was applied: a takeover of a claim whose claimer let its lease
//     pass.
//
// Writes by one replica never undo each other in this sense: one replica's passes see its own writes.
func undoneWrites(reqs []hivelocitysim.Request, settle, adoptAfter time.Duration) []string {
	bySeq := map[int64]hivelocitysim.Request{}
	for _, r := range reqs {
		bySeq[r.Seq] = r
	}
	tagsOf := func(r hivelocitysim.Request) ([]string, bool) {
		switch {
		case r.Op == hivelocitysim.OpPutTags && r.Status < 300:
			return r.Tags, true
		case r.Op == hivelocitysim.OpReloadDevice && r.Reload != nil && r.Reload.Started:
			return r.Reload.Tags, true
		}
		return nil, false
	}
	readBack := func(ua string, device int32, from, to int64, notBefore time.Time) bool {
		for _, r := range reqs {
			if r.Seq > from && r.Seq < to && r.DeviceID == device && r.UserAgent == ua && r.Op == hivelocitysim.OpGetDeviceDump &&
				!r.Time.Before(notBefore) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, w := range reqs {
		tags, ok := tagsOf(w)
		if !ok || w.Previous == nil || w.Previous.Seq == 0 || w.Previous.UserAgent == w.UserAgent {
			continue
		}
		prev := *w.Previous
		claim := tagOf(prev.Tags, hivelocity.KeyClaim)
		if claim == "" || tagOf(tags, hivelocity.KeyClaim) == claim {
			continue
		}
		p, logged := bySeq[prev.Seq]
		newClaim := logged && p.Op == hivelocitysim.OpPutTags && (p.Previous == nil || tagOf(p.Previous.Tags, hivelocity.KeyClaim) != claim)
		if newClaim && !readBack(prev.UserAgent, w.DeviceID, prev.Seq, w.Seq, p.Time.Add(settle)) {
			continue
		}
		if w.Time.Sub(claimTime(claim)) >= adoptAfter {
			continue
		}
		out = append(out, fmt.Sprintf("device %d: request %d (%s, %s) dropped claim %s that request %d (%s) wrote: %v → %v",
			w.DeviceID, w.Seq, w.UserAgent, w.Op, claim, prev.Seq, prev.UserAgent, prev.Tags, tags))
	}
	return out
}

// reloadsPerSpec counts, per device and spec tag, the reloads the simulator accepted.
func reloadsPerSpec(reqs []hivelocitysim.Request) map[int32]map[string]int {
	out := map[int32]map[string]int{}
	for _, r := range reqs {
		if r.Op != hivelocitysim.OpReloadDevice || r.Reload == nil || !r.Reload.Started {
			continue
		}
		if out[r.DeviceID] == nil {
			out[r.DeviceID] = map[string]int{}
		}
		out[r.DeviceID][tagOf(r.Reload.Tags, hivelocity.KeySpec)+"/"+tagOf(r.Reload.Tags, hivelocity.KeyRelease)]++
	}
	return out
}

// A replica whose --claim-settle differs from the one another replica reports with refuses to start: the claim
// proof holds only if every claimer settles as long.
func TestHivelocityReplicasAgreeOnTheClaimSettle(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 1)...))
	startProvisioner(t, s, "replica-a", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "alpha", poolSpec(1, "#alpha\n"))
	st := reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	require.NotNil(t, st.Metadata)
	require.Equal(t, (400 * time.Millisecond).String(), st.Metadata[hivelocity.MetadataClaimSettle])

	o := hvOptions(t, sim, "k")
	o.ClaimSettle = time.Second
	cfg := runtimeConfig(t, s, hivelocity.Name)
	cfg.Replica, cfg.ResyncAfter = "replica-b", time.Second
	a, err := hivelocity.New(cfg, o, testLogger())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = a.Run(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), hivelocity.MetadataClaimSettle)
	require.Contains(t, err.Error(), `"400ms"`)
}

// Every request names its replica in its User-Agent, so that the simulator's log tells who wrote what.
func TestHivelocityRequestsNameTheReplica(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 1)...))
	startProvisioner(t, s, "replica-x", hvOptions(t, sim, "k"))
	p := createHVPool(t, s, c, "alpha", poolSpec(1, "#alpha\n"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	reqs := sim.Requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.Equal(t, hivelocity.UserAgent("replica-x"), r.UserAgent, "request %d", r.Seq)
	}
}

// Hivelocity accepting a second reload of a reloading device (as the real API may), and showing a reload as not
// yet started for a while after its PUT: each device is still reloaded once, and a pool is reported ready only
// once its devices' reloads really ended.
func TestHivelocityReloadsOnceWhenTheAPIAcceptsASecond(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultConcurrentReloadAccepted}))
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag, Delay: 200 * time.Millisecond}))
	for _, k := range []string{"replica-a", "replica-b"} {
		startProvisioner(t, s, k, hvOptions(t, sim, "k"))
	}
	p := createHVPool(t, s, c, "alpha", poolSpec(2, "#alpha\n"))
	reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	require.Equal(t, 2, readyDevices(sim, p.Id.String(), specOf(t, s, p)), "reported ready only with every reload over")
	for id, bySpec := range reloadsPerSpec(sim.Requests()) {
		for spec, n := range bySpec {
			require.Equal(t, 1, n, "device %d reloaded %d times for %s", id, n, spec)
		}
	}
	for _, r := range sim.Requests() {
		require.False(t, r.Reload != nil && r.Reload.Restart, "request %d restarted a running reload", r.Seq)
	}
}
