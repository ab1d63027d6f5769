package hivelocitysim_test

import (
	"net/http"
	"testing"
	"time"

	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

func TestReloadFaults(t *testing.T) {
	const other = 8
	tests := []struct {
		name  string
		fault hivelocitysim.Fault
		// cps follow a reload of device 7, powered off, started at epoch (done after 5m without faults).
		cps []checkpoint
		// clear removes the fault after the checkpoints; then cleared are checked.
		cleared []checkpoint
	}{
		{"stuck reload", hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload}, []checkpoint{
			{time.Hour, true, "ON", "RELOADING", "Ubuntu 20.x"},
		}, []checkpoint{{0, false, "ON", "IN_USE", "Ubuntu 22.x"}}},
		{"stuck reload for a while", hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, For: 20 * time.Minute}, []checkpoint{
			{19 * time.Minute, true, "ON", "RELOADING", "Ubuntu 20.x"},
			{time.Minute, false, "ON", "IN_USE", "Ubuntu 22.x"},
		}, nil},
		{"stuck reload of another device", hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, DeviceID: other}, []checkpoint{
			{5 * time.Minute, false, "ON", "IN_USE", "Ubuntu 22.x"},
		}, nil},
		{"stuck reload powered off", hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReloadOff, DeviceID: 7}, []checkpoint{
			{time.Hour, true, "OFF", "RELOADING", "Ubuntu 20.x"},
		}, []checkpoint{
			{0, true, "ON", "RELOADING", "Ubuntu 20.x"},
			{4 * time.Minute, false, "ON", "IN_USE", "Ubuntu 22.x"}, // the installer still runs its full time
		}},
		{"failed reload", hivelocitysim.Fault{Kind: hivelocitysim.FaultFailedReload}, []checkpoint{
			{4 * time.Minute, true, "ON", "RELOADING", "Ubuntu 20.x"},
			{time.Minute, false, "OFF", "FAILED", "Ubuntu 20.x"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff), device(other, hivelocitysim.PowerOff))
			require.NoError(t, e.sim.SetFault(tt.fault))
			_, err := e.reload(t, 7, spec("node.example.com"), false)
			require.NoError(t, err)
			e.requireCheckpoints(t, 7, tt.cps)
			if tt.cleared != nil {
				require.True(t, e.sim.ClearFault(tt.fault.Kind, tt.fault.DeviceID))
				e.requireCheckpoints(t, 7, tt.cleared)
			}
		})
	}
}

func TestIgnoredShutdown(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn), device(8, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultIgnoredShutdown, DeviceID: 7}))
	e.power(t, 7, "shutdown")
	e.power(t, 8, "shutdown")
	e.clk.Step(time.Hour)
	require.Equal(t, "ON", e.dump(t, 7).PowerStatus)
	require.Equal(t, "OFF", e.dump(t, 8).PowerStatus)
	require.Equal(t, hivelocitysim.FaultIgnoredShutdown, e.sim.RequestsFor(7)[0].Fault)
}

func TestVanishedDevice(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn), device(8, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultVanishedDevice, DeviceID: 8}))
	calls := map[string]func() error{
		"get": func() error {
			_, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceIdResource(e.ctx, 8, nil)
			return err
		},
		"dump": func() error { _, _, err := e.api.DeviceApi.GetDeviceIdResource(e.ctx, 8, nil); return err },
		"tags": func() error { _, _, err := e.api.DeviceApi.GetDeviceTagIdResource(e.ctx, 8, nil); return err },
		"power": func() error {
			_, _, err := e.api.DeviceApi.PostPowerResource(e.ctx, 8, "shutdown", nil)
			return err
		},
		"reload": func() error { _, err := e.reload(t, 8, spec("a.example.com"), true); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			requireAPIError(t, call(), http.StatusNotFound)
		})
	}
	list, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, int32(7), list[0].DeviceId)
	st := e.state(t, 8)
	require.True(t, st.Vanished)
	require.Equal(t, "ON", st.PowerStatus, "nothing reached it")

	e.sim.ClearFaults()
	require.False(t, e.state(t, 8).Vanished)
	require.NoError(t, calls["get"]())
}

func TestDelayedTagWritesLastWriterWins(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "caphv-use=allow"))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultDelayedTagWrites, Delay: 10 * time.Second}))
	readTags := func() []string {
		tags, _, err := e.api.DeviceApi.GetDeviceTagIdResource(e.ctx, 7, nil)
		require.NoError(t, err)
		return tags.Tags
	}
	put := func(tags ...string) {
		got, _, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 7, hv.DeviceTag{Tags: tags}, nil)
		require.NoError(t, err)
		require.Equal(t, tags, got.Tags, "the write is acknowledged")
	}
	put("caphv-use=allow", "claim=replica-a")
	require.Equal(t, []string{"caphv-use=allow"}, readTags(), "replica A's own read does not see its claim yet")
	e.clk.Step(5 * time.Second)
	put("caphv-use=allow", "claim=replica-b")
	require.Equal(t, []string{"caphv-use=allow"}, readTags(), "replica B sees no claim either: both think they won")
	e.clk.Step(5 * time.Second)
	require.Equal(t, []string{"caphv-use=allow", "claim=replica-a"}, readTags())
	e.clk.Step(5 * time.Second)
	require.Equal(t, []string{"caphv-use=allow", "claim=replica-b"}, readTags(), "after the settle delay the last writer wins")
	require.Empty(t, e.state(t, 7).PendingTagWrites)

	e.sim.ClearFaults()
	put("free")
	require.Equal(t, []string{"free"}, readTags())
}

func TestStaleList(t *testing.T) {
	tests := []struct {
		name      string
		deviceID  int32
		wantStale map[int32]bool
	}{
		{"all devices", 0, map[int32]bool{7: true, 8: true}},
		{"one device", 8, map[int32]bool{7: false, 8: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "old"), device(8, hivelocitysim.PowerOn, "old"))
			require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultStaleList, DeviceID: tt.deviceID, MaxAge: 10 * time.Second}))
			for _, id := range []int32{7, 8} {
				_, _, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, id, hv.DeviceTag{Tags: []string{"new"}}, nil)
				require.NoError(t, err)
			}
			listTags := func() map[int32]string {
				list, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
				require.NoError(t, err)
				out := map[int32]string{}
				for _, d := range list {
					out[d.DeviceId] = d.Tags[0]
				}
				return out
			}
			e.clk.Step(10 * time.Second)
			got := listTags()
			for id, stale := range tt.wantStale {
				want := "new"
				if stale {
					want = "old"
				}
				require.Equal(t, want, got[id], "device %d at the snapshot's max age", id)
			}
			d, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceIdResource(e.ctx, 8, nil)
			require.NoError(t, err)
			require.Equal(t, []string{"new"}, d.Tags, "single reads are fresh")
			e.clk.Step(time.Second)
			require.Equal(t, map[int32]string{7: "new", 8: "new"}, listTags(), "an older snapshot is retaken")
		})
	}
}

func TestRequestFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault hivelocitysim.Fault
		// statuses are the answers to GET /device/7, GET /device/8 and the list, in rounds.
		rounds [][3]int
	}{
		{"server error on every request", hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError},
			[][3]int{{502, 502, 502}, {502, 502, 502}}},
		{"server error on one device", hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, DeviceID: 7, Status: 500},
			[][3]int{{500, 200, 200}}},
		{"server error three times", hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Count: 3},
			[][3]int{{502, 502, 502}, {200, 200, 200}}},
		{"429 storm", hivelocitysim.Fault{Kind: hivelocitysim.FaultRateLimitStorm},
			[][3]int{{429, 429, 429}, {429, 429, 429}}},
		{"429 storm on one device, twice", hivelocitysim.Fault{Kind: hivelocitysim.FaultRateLimitStorm, DeviceID: 8, Count: 2},
			[][3]int{{200, 429, 200}, {200, 429, 200}, {200, 200, 200}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn), device(8, hivelocitysim.PowerOn))
			require.NoError(t, e.sim.SetFault(tt.fault))
			for i, want := range tt.rounds {
				_, r7, _ := e.api.DeviceApi.GetDeviceIdResource(e.ctx, 7, nil)
				_, r8, _ := e.api.DeviceApi.GetDeviceIdResource(e.ctx, 8, nil)
				_, rl, _ := e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
				require.Equal(t, want, [3]int{r7.StatusCode, r8.StatusCode, rl.StatusCode}, "round %d", i)
			}
		})
	}
}

func TestRateLimitStormEnds(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{RateLimit: hivelocitysim.RateLimit{Limit: 100, Window: time.Hour}}, device(7, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultRateLimitStorm, For: 30 * time.Second}))
	_, resp, err := e.api.DeviceApi.GetPowerResource(e.ctx, 7, nil)
	swaggerErr := requireAPIError(t, err, http.StatusTooManyRequests)
	require.Equal(t, "Your IP is rate limited.", errorBody(t, swaggerErr)["description"])
	require.Equal(t, "0", resp.Header.Get(hivelocitysim.HeaderRateLimitRemaining))
	require.Equal(t, "30", resp.Header.Get(hivelocitysim.HeaderRateLimitReset), "the storm's end")
	require.Len(t, e.sim.Faults(), 1)

	e.clk.Step(30 * time.Second)
	_, resp, err = e.api.DeviceApi.GetPowerResource(e.ctx, 7, nil)
	require.NoError(t, err)
	require.Equal(t, "99", resp.Header.Get(hivelocitysim.HeaderRateLimitRemaining), "storm answers used no budget")
	require.Empty(t, e.sim.Faults())
}

func TestSetFaultValidation(t *testing.T) {
	tests := []struct {
		name  string
		fault hivelocitysim.Fault
	}{
		{"unknown kind", hivelocitysim.Fault{Kind: "meteor"}},
		{"negative device", hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, DeviceID: -1}},
		{"negative for", hivelocitysim.Fault{Kind: hivelocitysim.FaultStuckReload, For: -time.Second}},
		{"count on a device fault", hivelocitysim.Fault{Kind: hivelocitysim.FaultFailedReload, Count: 1}},
		{"status not 5xx", hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Status: 404}},
		{"status on another kind", hivelocitysim.Fault{Kind: hivelocitysim.FaultRateLimitStorm, Status: 503}},
		{"delayed tags without delay", hivelocitysim.Fault{Kind: hivelocitysim.FaultDelayedTagWrites}},
		{"delay on another kind", hivelocitysim.Fault{Kind: hivelocitysim.FaultVanishedDevice, Delay: time.Second}},
		{"stale list without max age", hivelocitysim.Fault{Kind: hivelocitysim.FaultStaleList}},
		{"max age on another kind", hivelocitysim.Fault{Kind: hivelocitysim.FaultIgnoredShutdown, MaxAge: time.Second}},
	}
	sim := hivelocitysim.New(hivelocitysim.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, sim.SetFault(tt.fault), hivelocitysim.ErrInvalidFault)
		})
	}
	require.Empty(t, sim.Faults())
}

func TestSetFaultReplacesSameKindAndDevice(t *testing.T) {
	sim := hivelocitysim.New(hivelocitysim.Options{})
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Count: 5}))
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, DeviceID: 3}))
	require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Status: 504}))
	require.Equal(t, []hivelocitysim.Fault{
		{Kind: hivelocitysim.FaultServerError, DeviceID: 3, Status: 502},
		{Kind: hivelocitysim.FaultServerError, Status: 504},
	}, sim.Faults())
	require.False(t, sim.ClearFault(hivelocitysim.FaultServerError, 4))
	require.True(t, sim.ClearFault(hivelocitysim.FaultServerError, 3))
	sim.ClearFaults()
	require.Empty(t, sim.Faults())
}
