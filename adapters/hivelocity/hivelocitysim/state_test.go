package hivelocitysim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

// checkpoint is what the API shows of a device after a clock step.
type checkpoint struct {
	step     time.Duration
	isReload bool
	power    string
	sps      string
	osName   string
}

func (e *env) requireCheckpoints(t *testing.T, id int32, cps []checkpoint) {
	t.Helper()
	for _, cp := range cps {
		e.clk.Step(cp.step)
		d := e.dump(t, id)
		elapsed := e.clk.Now().Sub(epoch)
		require.Equal(t, cp.isReload, d.IsReload, "isReload after %v", elapsed)
		require.Equal(t, cp.power, d.PowerStatus, "power after %v", elapsed)
		require.Equal(t, cp.sps, d.SpsStatus, "spsStatus after %v", elapsed)
		require.Equal(t, cp.osName, e.state(t, id).OSName, "osName after %v", elapsed)
	}
}

func TestReloadStateMachine(t *testing.T) {
	// Time scale 2 halves testDurations: 30s powered off, then 2m with the installer running.
	e := newEnv(t, hivelocitysim.Options{TimeScale: 2}, device(7, hivelocitysim.PowerOff))
	_, err := e.reload(t, 7, spec("node-1.example.com"), false)
	require.NoError(t, err)
	e.requireCheckpoints(t, 7, []checkpoint{
		{0, true, "OFF", "RELOADING", "Ubuntu 20.x"},
		{29 * time.Second, true, "OFF", "RELOADING", "Ubuntu 20.x"},
		{time.Second, true, "ON", "RELOADING", "Ubuntu 20.x"},
		{2*time.Minute - time.Second, true, "ON", "RELOADING", "Ubuntu 20.x"},
		{time.Second, false, "ON", "IN_USE", "Ubuntu 22.x"},
		{time.Hour, false, "ON", "IN_USE", "Ubuntu 22.x"},
	})
	st := e.state(t, 7)
	require.Equal(t, 1, st.Reloads)
	require.Equal(t, "node-1.example.com", st.Hostname)
	require.Nil(t, st.Reload)
}

func TestReloadStateIsVisibleInProcess(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff))
	_, err := e.reload(t, 7, spec("node-1.example.com", "t1"), false)
	require.NoError(t, err)
	st := e.state(t, 7)
	require.True(t, st.IsReload)
	require.Equal(t, &hivelocitysim.Reload{
		OSName: "Ubuntu 22.x", Hostname: "node-1.example.com", Script: "#cloud-config\n", Started: epoch,
		PowerOnAt: epoch.Add(time.Minute), DoneAt: epoch.Add(5 * time.Minute),
	}, st.Reload)
}

func TestDefaultDurationsScaled(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{TimeScale: 100, Durations: hivelocitysim.DefaultDurations()}, device(7, hivelocitysim.PowerOff))
	_, err := e.reload(t, 7, spec("node-1.example.com"), false)
	require.NoError(t, err)
	// A 10-minute reload at scale 100: 1.2s off, then 4.8s on.
	e.requireCheckpoints(t, 7, []checkpoint{
		{1200 * time.Millisecond, true, "ON", "RELOADING", "Ubuntu 20.x"},
		{4800 * time.Millisecond, false, "ON", "IN_USE", "Ubuntu 22.x"},
	})
}

func TestSetTimeScale(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff), device(8, hivelocitysim.PowerOff))
	_, err := e.reload(t, 7, spec("a.example.com"), false)
	require.NoError(t, err)
	require.NoError(t, e.sim.SetTimeScale(60))
	require.Equal(t, float64(60), e.sim.TimeScale())
	_, err = e.reload(t, 8, spec("b.example.com"), false)
	require.NoError(t, err)

	e.clk.Step(5 * time.Second)
	require.False(t, e.dump(t, 8).IsReload, "a reload started after the change takes 5m/60")
	require.True(t, e.dump(t, 7).IsReload, "a running reload keeps its end")
	e.clk.Step(5 * time.Minute)
	require.False(t, e.dump(t, 7).IsReload)

	for _, bad := range []float64{0, -1} {
		require.ErrorIs(t, e.sim.SetTimeScale(bad), hivelocitysim.ErrInvalidSetting)
	}
}

func TestReloadWithoutChangeOnlyReplacesTags(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "old"))
	same := spec("device-7.hivelocity.example", "new")
	same.OsName, same.Script, same.ForceReload = "Ubuntu 20.x", "", false
	_, err := e.reload(t, 7, same, false)
	require.NoError(t, err, "no reload, so no powered-off check")
	st := e.state(t, 7)
	require.False(t, st.IsReload)
	require.Equal(t, []string{"new"}, st.Tags)
	require.False(t, e.sim.Requests()[0].Reload.Started)

	same.ForceReload = true
	_, err = e.reload(t, 7, same, true)
	require.NoError(t, err)
	require.True(t, e.state(t, 7).IsReload, "forceReload reloads without changes")
	require.True(t, e.sim.Requests()[1].Reload.Started)
}

func TestPowerTransitions(t *testing.T) {
	tests := []struct {
		name    string
		initial string
		actions []string
		cps     []checkpoint // osName unchanged throughout
	}{
		{"shutdown", "ON", []string{"shutdown"}, []checkpoint{
			{29 * time.Second, false, "ON", "IN_USE", ""}, {time.Second, false, "OFF", "IN_USE", ""},
		}},
		{"boot", "OFF", []string{"boot"}, []checkpoint{
			{59 * time.Second, false, "OFF", "IN_USE", ""}, {time.Second, false, "ON", "IN_USE", ""},
		}},
		{"reboot stays ON", "ON", []string{"reboot"}, []checkpoint{
			{30 * time.Second, false, "ON", "IN_USE", ""}, {time.Minute, false, "ON", "IN_USE", ""},
		}},
		{"a repeated shutdown does not restart the clock", "ON", []string{"shutdown", "shutdown"}, []checkpoint{
			{30 * time.Second, false, "OFF", "IN_USE", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, hivelocitysim.Options{}, device(7, tt.initial))
			for _, a := range tt.actions {
				require.Equal(t, tt.initial, e.power(t, 7, a).PowerStatus)
			}
			for i := range tt.cps {
				tt.cps[i].osName = "Ubuntu 20.x"
			}
			e.requireCheckpoints(t, 7, tt.cps)
			require.Nil(t, e.state(t, 7).PowerTransition)
		})
	}
}

func TestReloadCancelsPowerTransition(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	e.power(t, 7, "shutdown")
	_, err := e.reload(t, 7, spec("a.example.com"), false)
	require.Error(t, err, "still ON while the shutdown runs")
	_, err = e.reload(t, 7, spec("a.example.com"), true)
	require.NoError(t, err)
	st := e.state(t, 7)
	require.Nil(t, st.PowerTransition)
	require.Equal(t, "OFF", st.PowerStatus)
}

func TestSeedValidation(t *testing.T) {
	ok := device(1, "")
	tests := []struct {
		name   string
		mutate func(d *hivelocitysim.Device)
	}{
		{"no id", func(d *hivelocitysim.Device) { d.ID = 0 }},
		{"no location", func(d *hivelocitysim.Device) { d.LocationName = "" }},
		{"no product", func(d *hivelocitysim.Device) { d.ProductID = 0 }},
		{"bad power", func(d *hivelocitysim.Device) { d.PowerStatus = "on" }},
		{"seeded reloading", func(d *hivelocitysim.Device) { d.SPSStatus = hivelocitysim.StatusReloading }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := hivelocitysim.New(hivelocitysim.Options{})
			d := ok
			tt.mutate(&d)
			require.ErrorIs(t, sim.Seed(ok, d), hivelocitysim.ErrInvalidDevice)
			require.Empty(t, sim.Devices(), "nothing is added")
		})
	}
	sim := hivelocitysim.New(hivelocitysim.Options{})
	require.ErrorIs(t, sim.Seed(ok, ok), hivelocitysim.ErrInvalidDevice, "an id twice")
}

func TestSeedDefaultsAndReplaces(t *testing.T) {
	sim := hivelocitysim.New(hivelocitysim.Options{})
	require.NoError(t, sim.Seed(hivelocitysim.Device{ID: 300, LocationName: "TPA1", ProductID: 9999}))
	d, ok := sim.Device(300)
	require.True(t, ok)
	require.Equal(t, hivelocitysim.Device{
		ID: 300, Hostname: "device-300.hivelocity.example", LocationName: "TPA1", ProductID: 9999,
		ProductName: "Product 9999", PrimaryIP: "10.0.1.44", PowerStatus: "ON", SPSStatus: "IN_USE", Tags: []string{},
	}, d.Device)

	require.NoError(t, sim.Seed(hivelocitysim.Device{ID: 300, LocationName: "NYC1", ProductID: 9999, PowerStatus: "OFF"}))
	d, _ = sim.Device(300)
	require.Equal(t, "NYC1", d.LocationName)
	require.Len(t, sim.Devices(), 1)
	_, ok = sim.Device(301)
	require.False(t, ok)
}

func TestParseDevicesAndKeys(t *testing.T) {
	devices, err := hivelocitysim.ParseDevices([]byte(`[{"deviceId": 5, "locationName": "LAX2", "productId": 504, "tags": ["a"]}]`))
	require.NoError(t, err)
	require.Equal(t, []hivelocitysim.Device{{ID: 5, LocationName: "LAX2", ProductID: 504, Tags: []string{"a"}}}, devices)
	for _, bad := range []string{`{}`, `[{"deviceId": 5, "locationName": "LAX2", "productId": 504, "colour": "red"}]`, `[{"deviceId": 5}]`} {
		_, err := hivelocitysim.ParseDevices([]byte(bad))
		require.True(t, errors.Is(err, hivelocitysim.ErrInvalidDevice), "%s: %v", bad, err)
	}
	require.Equal(t, []string{"k1", "k2"}, hivelocitysim.ParseAPIKeys([]byte("# keys\n k1 \n\nk2\n")))
}

func TestDemoDevices(t *testing.T) {
	devices := hivelocitysim.DemoDevices()
	require.Len(t, devices, 12)
	count := map[string]int{}
	for _, d := range devices {
		require.Contains(t, d.Tags, hivelocitysim.TagUseAllow)
		count[d.LocationName+" "+d.Tags[1]]++
	}
	require.Equal(t, map[string]int{
		"LAX2 caphvlabel:deviceType=hvControlPlane": 2, "LAX2 caphvlabel:deviceType=hvWorker": 4,
		"NYC1 caphvlabel:deviceType=hvControlPlane": 2, "NYC1 caphvlabel:deviceType=hvWorker": 4,
	}, count)
	require.NoError(t, hivelocitysim.New(hivelocitysim.Options{}).Seed(devices...))
}
