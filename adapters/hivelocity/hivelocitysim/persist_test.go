package hivelocitysim_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

// TestStateFileRestartsWhereItStopped writes tags and starts a reload through a simulator whose handler saves its
// state, then restores the saved state into a new simulator on the same clock: the tags are there, and the reload
// ends when it would have ended in the first one.
func TestStateFileRestartsWhereItStopped(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(1, hivelocitysim.PowerOff), device(2, hivelocitysim.PowerOn, "keep"))
	path := filepath.Join(t.TempDir(), "dev", "hivelocity.json")
	file := hivelocitysim.NewStateFile(path, e.sim)
	saving := httptest.NewServer(file.Handler(e.sim.Handler()))
	t.Cleanup(saving.Close)

	_, err := hivelocitysim.LoadState(path)
	require.ErrorIs(t, err, fs.ErrNotExist)

	got := do(t, http.MethodPut, saving.URL+"/device/2/tags", testKey, map[string]any{"tags": []string{"keep", "owner=a"}})
	require.Equal(t, http.StatusOK, got.status, string(got.body))
	// The answer came after the save: the file already holds the tags.
	st, err := hivelocitysim.LoadState(path)
	require.NoError(t, err)
	require.Equal(t, []string{"keep", "owner=a"}, st.Devices[1].Tags)

	got = do(t, http.MethodPut, saving.URL+"/bare-metal-devices/1", testKey, spec("node-1.example.com"))
	require.Equal(t, http.StatusOK, got.status, string(got.body))
	st, err = hivelocitysim.LoadState(path)
	require.NoError(t, err)

	restored := hivelocitysim.New(hivelocitysim.Options{Clock: e.clk, Durations: testDurations, APIKeys: []string{testKey}})
	require.NoError(t, restored.Restore(st))
	require.Equal(t, e.sim.Snapshot(), restored.Snapshot())
	d, ok := restored.Device(1)
	require.True(t, ok)
	require.True(t, d.IsReload)

	e.clk.Step(testDurations.ReloadPoweredOff + testDurations.ReloadPoweredOn)
	d, _ = restored.Device(1)
	require.False(t, d.IsReload)
	require.Equal(t, hivelocitysim.StatusInUse, d.SPSStatus)
	require.Equal(t, "Ubuntu 22.x", d.OSName)
}

func TestRestoreRefusesBadStates(t *testing.T) {
	good := hivelocitysim.New(hivelocitysim.Options{})
	require.NoError(t, good.Seed(device(7, hivelocitysim.PowerOn)))
	base := good.Snapshot()
	tests := []struct {
		name   string
		modify func(st *hivelocitysim.State)
	}{
		{"device without location", func(st *hivelocitysim.State) { st.Devices[0].LocationName = "" }},
		{"device twice", func(st *hivelocitysim.State) { st.Devices = append(st.Devices, st.Devices[0]) }},
		{"product without systems", func(st *hivelocitysim.State) { st.Products[0].OperatingSystems = nil }},
		{"ssh key without name", func(st *hivelocitysim.State) { st.SSHKeys = []hivelocitysim.SSHKey{{ID: 3}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := hivelocitysim.New(hivelocitysim.Options{})
			require.NoError(t, sim.Seed(device(9, hivelocitysim.PowerOn)))
			before := sim.Snapshot()
			st := hivelocitysim.State{
				Devices:  append([]hivelocitysim.DeviceState(nil), base.Devices...),
				Products: append([]hivelocitysim.Product(nil), base.Products...),
				SSHKeys:  append([]hivelocitysim.SSHKey(nil), base.SSHKeys...),
			}
			tt.modify(&st)
			require.ErrorIs(t, sim.Restore(st), hivelocitysim.ErrInvalidState)
			require.Equal(t, before, sim.Snapshot(), "a refused state changes nothing")
		})
	}
}

func TestLoadStateRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"devices": [], "faults": []}`), 0o600))
	_, err := hivelocitysim.LoadState(path)
	require.ErrorIs(t, err, hivelocitysim.ErrInvalidState)
}

func TestHealthNeedsNoKey(t *testing.T) {
	sim := hivelocitysim.New(hivelocitysim.Options{Clock: testingclock.NewFakeClock(time.Now())})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	got := do(t, http.MethodGet, srv.URL+hivelocitysim.HealthPath, "", nil)
	require.Equal(t, http.StatusOK, got.status)
	require.JSONEq(t, `{"status":"ok"}`, string(got.body))
}
