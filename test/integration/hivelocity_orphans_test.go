package integration

import (
	"bufio"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Orphan metrics the provisioner serves on /metrics.
const (
	metricOrphansFound    = "hyperfleet_hivelocity_orphaned_devices_found_total"
	metricOrphansReleased = "hyperfleet_hivelocity_orphaned_devices_released_total"
	metricOrphansListed   = "hyperfleet_hivelocity_orphaned_devices_listed_total"
)

// Devices tagged for node pools the API does not know are released — wiped and untagged — once the grace period
// has passed, and not before: the devices of a pool removed behind the provisioner's back (force-delete skips
// its finalizer), a device tagged by hand for a made-up pool of an existing cluster, and one for a made-up pool
// of a made-up cluster. As with a deleted pool, a device only claimed is just untagged. A live pool's device is
// left alone.
func TestHivelocityOrphansAreReleasedAfterTheGracePeriod(t *testing.T) {
	const grace = 2 * time.Second
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	require.NoError(t, sim.Seed(spareDevices(100, 3)...))
	o := hvOptions(t, sim, "k")
	o.OrphanGrace, o.RecheckAfter = grace, 300*time.Millisecond
	a := startOrphanProvisioner(t, s, o)

	kept := createHVPool(t, s, c, "kept", poolSpec(1, "#kept\n"))
	leaked := createHVPool(t, s, c, "leaked", poolSpec(2, "#leaked\n"))
	for _, p := range []*api.NodePool{kept, leaked} {
		reportSays(t, s, p, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)
	}
	keptDevices := owned(sim, kept.Id.String())
	require.Len(t, keptDevices, 1)
	var orphans []int32
	for _, d := range owned(sim, leaked.Id.String()) {
		orphans = append(orphans, d.ID)
	}
	require.Len(t, orphans, 2)

	orphanedAt := time.Now()
	resp, err := s.ForceDeleteNodePoolWithResponse(ctxFor(t), c.Id, leaked.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode(), "body: %s", resp.Body)
	// By hand: one device only claimed (it never got a pool's data: it is untagged, not wiped), and one that looks
	// provisioned, for a pool of a cluster that does not exist either.
	reloaded := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	byHand := []hivelocitysim.Device{
		spareDevices(300, 1, hivelocity.KeyCluster+"="+c.Id.String(), hivelocity.KeyNodePool+"="+uuid.NewString(), hivelocity.KeySlot+"=0")[0],
		spareDevices(301, 1, hivelocity.KeyCluster+"="+uuid.NewString(), hivelocity.KeyNodePool+"="+uuid.NewString(), hivelocity.KeySlot+"=0",
			hivelocity.KeySpec+"=0123456789ab", hivelocity.KeyReload+"="+reloaded)[0],
	}
	require.NoError(t, sim.Seed(byHand...))
	orphans = append(orphans, 300, 301)
	onlyClaimed := map[int32]bool{300: true}

	for _, id := range orphans {
		waitFor(t, "orphaned device "+strconv.Itoa(int(id))+" untagged", func() bool {
			d, ok := simDeviceByID(sim, id)
			return ok && !slices.ContainsFunc(d.Tags, func(tag string) bool { return strings.HasPrefix(tag, hivelocity.TagPrefix) })
		})
	}
	for _, id := range orphans {
		var wiped bool
		for _, r := range sim.Requests() {
			if r.DeviceID != id || r.Method == http.MethodGet || r.Time.Before(orphanedAt) { // before: the pool's own provisioning
				continue
			}
			require.False(t, r.Time.Before(orphanedAt.Add(grace)), "device %d was written to within the grace period: %+v", id, r)
			if r.Op == hivelocitysim.OpReloadDevice && r.Reload != nil && r.Reload.Started {
				require.True(t, strings.HasPrefix(r.Reload.Hostname, "spare-"), "device %d reloaded as %q", id, r.Reload.Hostname)
				require.Empty(t, r.Reload.Script, "device %d wiped with user data", id)
				wiped = true
			}
		}
		require.Equal(t, !onlyClaimed[id], wiped, "device %d: wiped %v", id, wiped)
		d, _ := simDeviceByID(sim, id)
		require.Contains(t, d.Tags, hivelocity.TagUseAllow, "the operator's tags stay")
	}

	// The live pool kept its device, reloaded once, and is still ready.
	require.Equal(t, []int32{keptDevices[0].ID}, stateIDs(owned(sim, kept.Id.String())))
	require.Len(t, startedReloads(sim)[keptDevices[0].ID], 1)
	reportSays(t, s, kept, "Available", api.ConditionStatusTrue, hivelocity.ReasonAllDevicesReady)

	waitFor(t, "the released orphans counted", func() bool { return orphanMetric(t, a.OpsAddr(), metricOrphansReleased) == float64(len(orphans)) })
	require.Equal(t, float64(len(orphans)), orphanMetric(t, a.OpsAddr(), metricOrphansFound))
	require.Zero(t, orphanMetric(t, a.OpsAddr(), metricOrphansListed))
}

// With --orphan-dry-run, orphaned devices are only listed (logged and counted): nothing is written to them.
func TestHivelocityOrphansDryRunOnlyLists(t *testing.T) {
	s, c := hvServer(t)
	sim := startHivelocitySim(t, "k")
	byHand := []hivelocitysim.Device{
		spareDevices(300, 1, hivelocity.KeyCluster+"="+c.Id.String(), hivelocity.KeyNodePool+"="+uuid.NewString(), hivelocity.KeySlot+"=0")[0],
		spareDevices(301, 1, hivelocity.KeyCluster+"="+uuid.NewString(), hivelocity.KeyNodePool+"="+uuid.NewString(), hivelocity.KeySlot+"=0")[0],
	}
	require.NoError(t, sim.Seed(byHand...))
	o := hvOptions(t, sim, "k")
	o.OrphanGrace, o.RecheckAfter, o.OrphanDryRun = 500*time.Millisecond, 200*time.Millisecond, true
	a := startOrphanProvisioner(t, s, o)

	waitFor(t, "both orphans listed", func() bool { return orphanMetric(t, a.OpsAddr(), metricOrphansListed) == 2 })
	// Let the collector go round a few more times past the grace period: a release would have begun by then.
	lists := func() int {
		n := 0
		for _, r := range sim.Requests() {
			if r.Op == hivelocitysim.OpListDevices {
				n++
			}
		}
		return n
	}
	after := lists()
	waitFor(t, "more device lists", func() bool { return lists() >= after+5 })

	require.Equal(t, float64(2), orphanMetric(t, a.OpsAddr(), metricOrphansFound))
	require.Equal(t, float64(2), orphanMetric(t, a.OpsAddr(), metricOrphansListed), "a device listed twice")
	require.Zero(t, orphanMetric(t, a.OpsAddr(), metricOrphansReleased))
	for _, r := range sim.Requests() {
		require.False(t, r.DeviceID != 0 && r.Method != http.MethodGet, "a dry run wrote to a device: %+v", r)
	}
	for _, want := range byHand {
		d, ok := simDeviceByID(sim, want.ID)
		require.True(t, ok)
		require.Equal(t, want.Tags, d.Tags)
		require.Equal(t, hivelocitysim.PowerOn, d.PowerStatus)
	}
}

// startOrphanProvisioner runs a provisioner until the test ends and returns it, for its /metrics.
func startOrphanProvisioner(tb testing.TB, s *apiServer, o hivelocity.Options) *hivelocity.Adapter {
	tb.Helper()
	a, _ := runProvisioner(tb, s, "orphans", o)
	return a
}

// orphanMetric returns the value of a series without labels other than the adapter's on the ops listener at addr, 0
// when it is not served.
func orphanMetric(tb testing.TB, addr, name string) float64 {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctxFor(tb), http.MethodGet, "http://"+addr+"/metrics", http.NoBody)
	require.NoError(tb, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, resp.Body.Close()) }()
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(tb, err, line)
		return v
	}
	require.NoError(tb, sc.Err())
	return 0
}

// simDeviceByID returns the simulator's device id.
func simDeviceByID(sim *hvSim, id int32) (hivelocitysim.DeviceState, bool) {
	for _, d := range sim.Devices() {
		if d.ID == id {
			return d, true
		}
	}
	return hivelocitysim.DeviceState{}, false
}

func stateIDs(ds []hivelocitysim.DeviceState) []int32 {
	out := make([]int32, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}
