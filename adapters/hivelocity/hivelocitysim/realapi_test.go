package hivelocitysim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

// stepUntil runs call in the background and steps the fake clock a second at a time whenever the simulator waits
// on it, until call returns. It returns call's error and the clock time the answer came at.
func (e *env) stepUntil(tb testing.TB, call func() error) (time.Time, error) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			return e.clk.Now(), err
		default:
		}
		require.True(tb, time.Now().Before(deadline), "the answer never came")
		if e.clk.HasWaiters() {
			e.clk.Step(time.Second)
		} else {
			time.Sleep(time.Millisecond) // let the request reach its wait
		}
	}
}

func TestSlowAnswers(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "old"), device(8, hivelocitysim.PowerOn))
	f := hivelocitysim.Fault{Kind: hivelocitysim.FaultSlowAnswers, DeviceID: 7, Delay: 10 * time.Second, MaxDelay: 20 * time.Second}
	require.NoError(t, e.sim.SetFault(f))

	e.dump(t, 8) // another device's answer does not wait: the clock is never stepped
	require.Equal(t, epoch, e.clk.Now())

	for i := range 5 {
		sent := e.clk.Now()
		tags := []string{"write", string(rune('a' + i))}
		answered, err := e.stepUntil(t, func() error {
			_, _, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 7, hv.DeviceTag{Tags: tags}, nil)
			return err
		})
		require.NoError(t, err)
		// The clock moves in whole seconds, so each of the two waits may end up to a second after it was due.
		require.GreaterOrEqual(t, answered.Sub(sent), f.Delay, "round trip %d", i)
		require.LessOrEqual(t, answered.Sub(sent), f.MaxDelay+2*time.Second, "round trip %d", i)
		reqs := e.sim.RequestsFor(7)
		applied := reqs[len(reqs)-1]
		require.Equal(t, tags, applied.Tags)
		require.False(t, applied.Time.Before(sent), "applied after it was sent")
		require.False(t, applied.Time.After(answered), "applied before it was answered")
		require.Equal(t, tags, e.state(t, 7).Tags)
	}

	t.Run("real clock", func(t *testing.T) {
		sim := hivelocitysim.New(hivelocitysim.Options{APIKeys: []string{testKey}})
		require.NoError(t, sim.Seed(device(7, hivelocitysim.PowerOn)))
		require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultSlowAnswers, Delay: 20 * time.Millisecond}))
		r := newRealEnv(t, sim)
		start := time.Now()
		r.dump(t, 7)
		require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "the waits add up to the delay")
		got := sim.Requests()
		require.Len(t, got, 1)
		require.False(t, got[0].Time.Before(start))
	})

	t.Run("a client that gives up before the request is applied", func(t *testing.T) {
		e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "old"))
		// The wait before applying is a random share of at least a minute: zero only with odds of one in 6e10.
		require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultSlowAnswers, Delay: time.Minute}))
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() {
			_, _, err := e.api.DeviceApi.PutDeviceTagIdResource(ctx, 7, hv.DeviceTag{Tags: []string{"lost"}}, nil)
			done <- err
		}()
		require.Eventually(t, e.clk.HasWaiters, 10*time.Second, time.Millisecond)
		cancel()
		require.Error(t, <-done)
		require.Eventually(t, func() bool { return !e.clk.HasWaiters() }, 10*time.Second, time.Millisecond,
			"the simulator stops waiting for a client that left")
		require.Empty(t, e.sim.Requests(), "never applied, so never logged")
		require.Equal(t, []string{"old"}, e.state(t, 7).Tags)
	})
}

// newRealEnv serves sim, on its own clock, to the official client.
func newRealEnv(tb testing.TB, sim *hivelocitysim.Simulator) *env {
	tb.Helper()
	e := &env{sim: sim, ctx: withKey(testKey)}
	e.srv = httptest.NewServer(sim.Handler())
	tb.Cleanup(e.srv.Close)
	e.api = newClient(e.srv, "")
	return e
}

func TestReloadStartLag(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag, Delay: 30 * time.Second}))
	_, err := e.reload(t, 7, spec("node-1.example.com", "owner=a"), false)
	require.NoError(t, err)
	put := e.sim.Requests()[0]
	require.True(t, put.Reload.Started)
	require.Equal(t, epoch.Add(30*time.Second), put.Reload.BeginsAt)
	require.Equal(t, hivelocitysim.FaultReloadStartLag, put.Fault)

	st := e.state(t, 7)
	require.Equal(t, []string{"owner=a"}, st.Tags, "the tags are written at once")
	require.Nil(t, st.Reload)
	require.NotNil(t, st.PendingReload)
	require.Equal(t, 1, st.Reloads)
	d, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceIdResource(e.ctx, 7, nil)
	require.NoError(t, err)
	require.Equal(t, "device-7.hivelocity.example", d.Hostname, "the old hostname until the reload begins")

	_, err = e.reload(t, 7, spec("node-2.example.com"), false)
	requireAPIError(t, err, http.StatusConflict)

	e.requireCheckpoints(t, 7, []checkpoint{
		{0, false, "OFF", "IN_USE", "Ubuntu 20.x"},
		{29 * time.Second, false, "OFF", "IN_USE", "Ubuntu 20.x"},
		{time.Second, true, "OFF", "RELOADING", "Ubuntu 20.x"},
		{time.Minute, true, "ON", "RELOADING", "Ubuntu 20.x"},
		{4 * time.Minute, false, "ON", "IN_USE", "Ubuntu 22.x"},
	})
	require.Equal(t, "node-1.example.com", e.state(t, 7).Hostname)
}

func TestReloadStartLagCancelsAPowerActionInTheLag(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag, Delay: 10 * time.Second}))
	_, err := e.reload(t, 7, spec("node-1.example.com"), true)
	require.NoError(t, err)
	require.Equal(t, "ON", e.power(t, 7, "reboot").PowerStatus, "a device that shows no reload takes a power action")
	e.requireCheckpoints(t, 7, []checkpoint{
		{10 * time.Second, true, "OFF", "RELOADING", "Ubuntu 20.x"},
		{time.Minute, true, "ON", "RELOADING", "Ubuntu 20.x"},
	})
	require.Nil(t, e.state(t, 7).PowerTransition)
}

func TestConcurrentReload(t *testing.T) {
	tests := []struct {
		name   string
		faults []hivelocitysim.Fault
		// second is how long after the first PUT the second comes.
		second     time.Duration
		wantStatus int
		// wantDone is when the reload ends, from epoch.
		wantDone time.Duration
	}{
		{"refused without the fault", nil, 2 * time.Minute, http.StatusConflict, 5 * time.Minute},
		{"restarts a running reload", []hivelocitysim.Fault{{Kind: hivelocitysim.FaultConcurrentReloadAccepted}},
			2 * time.Minute, http.StatusOK, 7 * time.Minute},
		{"refused in the start lag without the fault", []hivelocitysim.Fault{{Kind: hivelocitysim.FaultReloadStartLag, Delay: time.Minute}},
			30 * time.Second, http.StatusConflict, 6 * time.Minute},
		{"replaces a reload in its start lag", []hivelocitysim.Fault{
			{Kind: hivelocitysim.FaultReloadStartLag, Delay: time.Minute},
			{Kind: hivelocitysim.FaultConcurrentReloadAccepted, DeviceID: 7},
		}, 30 * time.Second, http.StatusOK, 30*time.Second + 6*time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff))
			for _, f := range tt.faults {
				require.NoError(t, e.sim.SetFault(f))
			}
			_, err := e.reload(t, 7, spec("first.example.com"), false)
			require.NoError(t, err)
			e.clk.Step(tt.second)
			_, err = e.reload(t, 7, spec("second.example.com"), true)
			wantReloads := 1
			if tt.wantStatus == http.StatusOK {
				require.NoError(t, err)
				wantReloads = 2
				got := e.sim.Requests()[1].Reload
				require.True(t, got.Started)
				require.True(t, got.Restart)
			} else {
				requireAPIError(t, err, tt.wantStatus)
			}
			require.Equal(t, wantReloads, e.state(t, 7).Reloads)
			e.clk.SetTime(epoch.Add(tt.wantDone - time.Second))
			require.True(t, e.dump(t, 7).IsReload)
			e.clk.SetTime(epoch.Add(tt.wantDone))
			require.False(t, e.dump(t, 7).IsReload)
		})
	}
}

func TestRefused(t *testing.T) {
	const forbidden = "You don't have the permission to access the requested resource. It is either read-protected or not readable by the server."
	type attempt struct {
		name   string
		device int32
		status int
	}
	tests := []struct {
		name    string
		fault   hivelocitysim.Fault
		message string
		// attempts run in order: tags PUT, reload PUT, power POST, dump GET, as named.
		attempts []attempt
	}{
		{"tag writes of one device", hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Op: hivelocitysim.OpPutTags, DeviceID: 7}, forbidden,
			[]attempt{{"tags", 7, 403}, {"tags", 8, 200}, {"reload", 7, 200}, {"dump", 7, 200}, {"tags", 7, 403}}},
		{"every write, twice", hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Status: 423, Message: "Device is locked.", Count: 2}, "Device is locked.",
			[]attempt{{"dump", 7, 200}, {"power", 8, 423}, {"reload", 7, 423}, {"tags", 7, 200}}},
		{"reads too", hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Op: hivelocitysim.OpGetDeviceDump}, forbidden,
			[]attempt{{"dump", 8, 403}, {"tags", 8, 200}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "old"), device(8, hivelocitysim.PowerOn, "old"))
			require.NoError(t, e.sim.SetFault(tt.fault))
			for i, a := range tt.attempts {
				before := e.state(t, a.device)
				var err error
				switch a.name {
				case "tags":
					_, _, err = e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, a.device, hv.DeviceTag{Tags: []string{"new"}}, nil)
				case "reload":
					_, err = e.reload(t, a.device, spec("node.example.com"), true)
				case "power":
					_, _, err = e.api.DeviceApi.PostPowerResource(e.ctx, a.device, "shutdown", nil)
				case "dump":
					_, _, err = e.api.DeviceApi.GetDeviceIdResource(e.ctx, a.device, nil)
				}
				if a.status < 300 {
					require.NoError(t, err, "attempt %d", i)
					continue
				}
				body := errorBody(t, requireAPIError(t, err, a.status))
				require.Equal(t, map[string]any{"code": float64(a.status), "message": tt.message}, body, "attempt %d", i)
				require.Equal(t, before, e.state(t, a.device), "attempt %d changed nothing", i)
				reqs := e.sim.Requests()
				require.Equal(t, hivelocitysim.FaultRefused, reqs[len(reqs)-1].Fault)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	require.Nil(t, e.sim.History(99))
	e.clk.Step(time.Second)
	e.power(t, 7, "shutdown")
	e.clk.Step(time.Minute)
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag, Delay: 10 * time.Second}))
	_, err := e.reload(t, 7, spec("node-1.example.com"), false)
	require.NoError(t, err)
	e.clk.Step(time.Hour) // one read, long after: every step is dated when it happened
	const old, host = "device-7.hivelocity.example", "node-1.example.com"
	t0 := epoch.Add(61 * time.Second) // the reload PUT
	want := []hivelocitysim.Transition{
		{At: epoch, PowerStatus: "ON", OSName: "Ubuntu 20.x", SPSStatus: "IN_USE", Hostname: old},
		{At: epoch.Add(31 * time.Second), PowerStatus: "OFF", OSName: "Ubuntu 20.x", SPSStatus: "IN_USE", Hostname: old},
		{At: t0.Add(10 * time.Second), PowerStatus: "OFF", IsReload: true, OSName: "Ubuntu 20.x", SPSStatus: "RELOADING", Hostname: host},
		{At: t0.Add(70 * time.Second), PowerStatus: "ON", IsReload: true, OSName: "Ubuntu 20.x", SPSStatus: "RELOADING", Hostname: host},
		{At: t0.Add(310 * time.Second), PowerStatus: "ON", OSName: "Ubuntu 22.x", SPSStatus: "IN_USE", Hostname: host},
	}
	require.Equal(t, want, e.sim.History(7))
	h := decode[[]hivelocitysim.Transition](t, do(t, http.MethodGet, e.srv.URL+"/_sim/devices/7/history", "", nil))
	require.Len(t, h, len(want))
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, e.srv.URL+"/_sim/devices/99/history", "", nil).status)

	t.Run("bounded", func(t *testing.T) {
		e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
		for range 501 {
			e.power(t, 7, "shutdown")
			e.clk.Step(time.Minute)
			e.power(t, 7, "boot")
			e.clk.Step(time.Minute)
		}
		h := e.sim.History(7)
		require.Len(t, h, 1000)
		require.Equal(t, "OFF", h[0].PowerStatus, "the oldest entries went first")
		require.Equal(t, "ON", h[len(h)-1].PowerStatus)
	})
}

func TestPreviousWrite(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{APIKeys: []string{testKey, "other-key"}}, device(7, hivelocitysim.PowerOff, "caphv-use=allow"))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultDelayedTagWrites, Delay: 10 * time.Second}))
	replica := func(name string) *hv.APIClient {
		cfg := hv.NewConfiguration()
		cfg.BasePath, cfg.HTTPClient, cfg.UserAgent = e.srv.URL, e.srv.Client(), name
		return hv.NewAPIClient(cfg)
	}
	a, b := replica("hivelocity-provisioner/replica-a"), replica("hivelocity-provisioner/replica-b")
	_, _, err := a.DeviceApi.PutDeviceTagIdResource(e.ctx, 7, hv.DeviceTag{Tags: []string{"claim=a"}}, nil)
	require.NoError(t, err)
	e.clk.Step(time.Second)
	_, _, err = b.DeviceApi.PutDeviceTagIdResource(withKey("other-key"), 7, hv.DeviceTag{Tags: []string{"claim=b"}}, nil)
	require.NoError(t, err)
	e.clk.Step(time.Minute)
	_, _, err = a.BareMetalDevicesApi.PutBareMetalDeviceIdResource(e.ctx, 7, spec("node.example.com", "owner=a"), nil)
	require.NoError(t, err)

	reqs := e.sim.Requests()
	require.Len(t, reqs, 3)
	require.Equal(t, "hivelocity-provisioner/replica-a", reqs[0].UserAgent)
	require.Equal(t, &hivelocitysim.PreviousWrite{Tags: []string{"caphv-use=allow"}, Time: epoch}, reqs[0].Previous, "the seeded tags")
	require.Equal(t, &hivelocitysim.PreviousWrite{Tags: []string{"claim=a"}, Seq: 1, Time: epoch,
		UserAgent: "hivelocity-provisioner/replica-a", KeyID: hivelocitysim.KeyID(testKey)}, reqs[1].Previous,
		"replica a's write, not yet visible")
	require.Equal(t, &hivelocitysim.PreviousWrite{Tags: []string{"claim=b"}, Seq: 2, Time: epoch.Add(time.Second),
		UserAgent: "hivelocity-provisioner/replica-b", KeyID: hivelocitysim.KeyID("other-key")}, reqs[2].Previous,
		"a reload PUT writes tags too")
}

func TestDelayedTagWritesWithinARange(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultDelayedTagWrites, Delay: time.Second, MaxDelay: 3 * time.Second}))
	for i := range 20 {
		_, _, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 7, hv.DeviceTag{Tags: []string{string(rune('a' + i))}}, nil)
		require.NoError(t, err)
		e.clk.Step(10 * time.Millisecond)
	}
	pending := e.state(t, 7).PendingTagWrites
	require.Len(t, pending, 20, "none shows within a second")
	for i, w := range pending {
		lag := w.VisibleAt.Sub(w.Written)
		require.GreaterOrEqual(t, lag, time.Second, "write %d", i)
		if i > 0 {
			require.False(t, w.VisibleAt.Before(pending[i-1].VisibleAt), "write %d shows in order", i)
		}
	}
	require.LessOrEqual(t, pending[0].VisibleAt.Sub(pending[0].Written), 3*time.Second)
	e.clk.Step(3 * time.Second)
	require.Equal(t, []string{string(rune('a' + 19))}, e.state(t, 7).Tags, "the last writer wins")
}

func TestNewFaultsValidation(t *testing.T) {
	tests := []struct {
		name  string
		fault hivelocitysim.Fault
	}{
		{"slow answers without delay", hivelocitysim.Fault{Kind: hivelocitysim.FaultSlowAnswers}},
		{"max delay below delay", hivelocitysim.Fault{Kind: hivelocitysim.FaultSlowAnswers, Delay: 2 * time.Second, MaxDelay: time.Second}},
		{"max delay on a start lag", hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag, Delay: time.Second, MaxDelay: 2 * time.Second}},
		{"start lag without delay", hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag}},
		{"delay on concurrent reloads", hivelocitysim.Fault{Kind: hivelocitysim.FaultConcurrentReloadAccepted, Delay: time.Second}},
		{"refused with a 5xx", hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Status: 503}},
		{"refused with an unknown op", hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Op: "Launch"}},
		{"refused of unknown paths", hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, Op: hivelocitysim.OpUnknown}},
		{"op on another kind", hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Op: hivelocitysim.OpPutTags}},
		{"message on another kind", hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Message: "no"}},
		{"count on slow answers", hivelocitysim.Fault{Kind: hivelocitysim.FaultSlowAnswers, Delay: time.Second, Count: 1}},
	}
	sim := hivelocitysim.New(hivelocitysim.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, sim.SetFault(tt.fault), hivelocitysim.ErrInvalidFault)
		})
	}
	require.Empty(t, sim.Faults())

	// Refusals of one device with different ops stand side by side; ClearFault removes them all.
	for _, op := range []hivelocitysim.Operation{hivelocitysim.OpPutTags, hivelocitysim.OpPostPower, hivelocitysim.OpPutTags} {
		require.NoError(t, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultRefused, DeviceID: 3, Op: op}))
	}
	require.Len(t, sim.Faults(), 2)
	require.Equal(t, http.StatusForbidden, sim.Faults()[0].Status, "the default status is reported")
	require.True(t, sim.ClearFault(hivelocitysim.FaultRefused, 3))
	require.Empty(t, sim.Faults())
}

func TestAdminNewFaults(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(1, "ON"))
	base := e.srv.URL + "/_sim/faults"
	for _, f := range []map[string]any{
		{"kind": "slow_answers", "delay": "300ms", "maxDelay": "1.2s"},
		{"kind": "refused", "deviceId": 1, "op": "PutBareMetalDeviceId", "status": 409, "message": "busy", "count": 1},
	} {
		r := do(t, http.MethodPost, base, "", f)
		require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	}
	require.Equal(t, []hivelocitysim.Fault{
		{Kind: hivelocitysim.FaultSlowAnswers, Delay: 300 * time.Millisecond, MaxDelay: 1200 * time.Millisecond},
		{Kind: hivelocitysim.FaultRefused, DeviceID: 1, Op: hivelocitysim.OpReloadDevice, Status: 409, Message: "busy", Count: 1},
	}, e.sim.Faults())
	got := decode[[]map[string]any](t, do(t, http.MethodGet, base, "", nil))
	require.Equal(t, map[string]any{"kind": "slow_answers", "delay": "300ms", "maxDelay": "1.2s"}, got[0])
}

func TestStateKeepsAReloadInItsStartLag(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultReloadStartLag, Delay: time.Minute}))
	_, err := e.reload(t, 7, spec("node.example.com"), false)
	require.NoError(t, err)
	restored := hivelocitysim.New(hivelocitysim.Options{Clock: e.clk, Durations: testDurations})
	require.NoError(t, restored.Restore(e.sim.Snapshot()))
	e.clk.Step(time.Minute)
	d, ok := restored.Device(7)
	require.True(t, ok)
	require.True(t, d.IsReload, "the reload begins in the restored simulator when it would have")
	require.Len(t, restored.History(7), 2, "a restored device's history starts with its restored state")
}
