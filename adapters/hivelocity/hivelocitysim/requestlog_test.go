package hivelocitysim_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

func TestRequestLog(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff), device(8, hivelocitysim.PowerOn))
	api := newClient(e.srv, "/api/v2")
	_, _, err := api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
	require.NoError(t, err)
	e.clk.Step(time.Second)
	_, _, err = api.DeviceApi.GetDeviceIdResource(withKey("stolen"), 7, nil)
	require.Error(t, err)
	u := spec("node-1.example.com", "owner=pool-a")
	_, err = e.reload(t, 7, u, false)
	require.NoError(t, err)
	_, err = e.reload(t, 8, u, false)
	require.Error(t, err, "powered on")
	_, _, err = e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 8, hv.DeviceTag{}, nil)
	require.NoError(t, err)
	e.power(t, 8, "shutdown")
	do(t, http.MethodGet, e.srv.URL+"/nowhere", testKey, nil)

	key, stolen := hivelocitysim.KeyID(testKey), hivelocitysim.KeyID("stolen")
	const ua, raw = "Swagger-Codegen/1.0.0/go", "Go-http-client/1.1" // the official client's and net/http's
	wantReload := &hivelocitysim.ReloadCall{Hostname: "node-1.example.com", OSName: "Ubuntu 22.x",
		Tags: []string{"owner=pool-a"}, Script: "#cloud-config\n", ForceReload: true}
	started := *wantReload
	started.Started, started.BeginsAt = true, epoch.Add(time.Second)
	seeded := &hivelocitysim.PreviousWrite{Tags: []string{}, Time: epoch}
	want := []hivelocitysim.Request{
		{Seq: 1, Time: epoch, Method: "GET", Path: "/bare-metal-devices/", Op: hivelocitysim.OpListDevices, KeyID: key, UserAgent: ua, Status: 200},
		{Seq: 2, Time: epoch.Add(time.Second), Method: "GET", Path: "/device/7", Op: hivelocitysim.OpGetDeviceDump, DeviceID: 7, KeyID: stolen, UserAgent: ua, Status: 401},
		{Seq: 3, Time: epoch.Add(time.Second), Method: "PUT", Path: "/bare-metal-devices/7", Op: hivelocitysim.OpReloadDevice, DeviceID: 7, KeyID: key, UserAgent: ua, Status: 200, Reload: &started, Previous: seeded},
		{Seq: 4, Time: epoch.Add(time.Second), Method: "PUT", Path: "/bare-metal-devices/8", Op: hivelocitysim.OpReloadDevice, DeviceID: 8, KeyID: key, UserAgent: ua, Status: 400, Reload: wantReload},
		{Seq: 5, Time: epoch.Add(time.Second), Method: "PUT", Path: "/device/8/tags", Op: hivelocitysim.OpPutTags, DeviceID: 8, KeyID: key, UserAgent: ua, Status: 200, Tags: []string{}, Previous: seeded},
		{Seq: 6, Time: epoch.Add(time.Second), Method: "POST", Path: "/device/8/power", Query: "action=shutdown", Op: hivelocitysim.OpPostPower, DeviceID: 8, KeyID: key, UserAgent: ua, Status: 202, PowerAction: hivelocitysim.PowerShutdown},
		{Seq: 7, Time: epoch.Add(time.Second), Method: "GET", Path: "/nowhere", Op: hivelocitysim.OpUnknown, KeyID: key, UserAgent: raw, Status: 404},
	}
	got := e.sim.Requests()
	require.Equal(t, want, got)

	got[2].Reload.Tags[0] = "mutated"
	require.Equal(t, want, e.sim.Requests(), "Requests returns a copy")
	require.Equal(t, []int64{4, 5, 6}, seqs(e.sim.RequestsFor(8)))

	e.sim.ResetRequests()
	require.Empty(t, e.sim.Requests())
	e.dump(t, 7)
	require.Equal(t, []int64{8}, seqs(e.sim.Requests()), "numbering goes on")
}

func seqs(reqs []hivelocitysim.Request) []int64 {
	var out []int64
	for _, r := range reqs {
		out = append(out, r.Seq)
	}
	return out
}

// TestRequestLogAnswersProvisionerQuestions shows the queries a provisioner's tests make of the log.
func TestRequestLogAnswersProvisionerQuestions(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff), device(8, hivelocitysim.PowerOff))
	for _, id := range []int32{7, 8} {
		_, err := e.reload(t, id, spec("node.example.com", "pool=a"), false)
		require.NoError(t, err)
	}
	e.clk.Step(5 * time.Minute)
	_, err := e.reload(t, 7, spec("node.example.com", "pool=a"), true)
	require.NoError(t, err)

	type specKey struct {
		device           int32
		hostname, osName string
	}
	reloads := map[specKey]int{}
	perDevice := map[int32]int{}
	for _, r := range e.sim.Requests() {
		perDevice[r.DeviceID]++
		if r.Op == hivelocitysim.OpReloadDevice && r.Reload.Started {
			reloads[specKey{r.DeviceID, r.Reload.Hostname, r.Reload.OSName}]++
		}
	}
	require.Equal(t, map[specKey]int{{7, "node.example.com", "Ubuntu 22.x"}: 2, {8, "node.example.com", "Ubuntu 22.x"}: 1}, reloads,
		"device 7 was reloaded twice for the same spec")
	require.Equal(t, map[int32]int{7: 2, 8: 1}, perDevice)
}

// TestConcurrentTagWrites runs replicas writing tags and reading at once (run with -race): every write is logged,
// and the device ends with the tags of the last write in the log.
func TestConcurrentTagWrites(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn), device(8, hivelocitysim.PowerOn))
	const replicas, writes = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, replicas*writes*3+writes)
	for r := range replicas {
		wg.Go(func() {
			for w := range writes {
				tags := []string{"caphv-use=allow", "claim=" + string(rune('a'+r)) + "-" + string(rune('0'+w))}
				_, _, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 7, hv.DeviceTag{Tags: tags}, nil)
				errs <- err
				_, _, err = e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
				errs <- err
				_, _, err = e.api.DeviceApi.GetDeviceTagIdResource(e.ctx, 7, nil)
				errs <- err
				_ = e.sim.Devices()
				_ = e.sim.Requests()
			}
		})
	}
	wg.Go(func() {
		for range writes {
			errs <- e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, DeviceID: 8})
			e.sim.ClearFaults()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var last *hivelocitysim.Request
	puts := 0
	for _, r := range e.sim.Requests() {
		if r.Op == hivelocitysim.OpPutTags {
			require.Equal(t, http.StatusOK, r.Status)
			puts++
			last = &r
		}
	}
	require.Equal(t, replicas*writes, puts)
	require.Equal(t, last.Tags, e.state(t, 7).Tags)
}
