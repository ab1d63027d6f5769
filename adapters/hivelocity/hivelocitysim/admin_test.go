package hivelocitysim_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

func decode[T any](tb testing.TB, r rawResponse) T {
	tb.Helper()
	require.Equal(tb, http.StatusOK, r.status, string(r.body))
	require.Equal(tb, "application/json", r.header.Get("Content-Type"))
	var v T
	require.NoError(tb, json.Unmarshal(r.body, &v), string(r.body))
	return v
}

func TestAdminDevices(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{})
	base := e.srv.URL + "/_sim"
	r := do(t, http.MethodPost, base+"/devices", "", []hivelocitysim.Device{device(1, "OFF", "a"), device(2, "ON")})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))

	devices := decode[[]hivelocitysim.DeviceState](t, do(t, http.MethodGet, base+"/devices", "", nil))
	require.Len(t, devices, 2)
	require.Equal(t, []string{"a"}, devices[0].Tags)
	require.Equal(t, "OFF", devices[0].PowerStatus)

	_, err := e.reload(t, 1, spec("n.example.com"), false)
	require.NoError(t, err)
	d := decode[hivelocitysim.DeviceState](t, do(t, http.MethodGet, base+"/devices/1", "", nil))
	require.True(t, d.IsReload)
	require.Equal(t, epoch.Add(5*time.Minute), d.Reload.DoneAt)
	require.Equal(t, 1, d.Reloads)

	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, base+"/devices/99", "", nil).status)
	for _, bad := range []any{
		[]map[string]any{{"deviceId": 3, "locationName": "LAX2", "productId": 504, "colour": "red"}},
		[]map[string]any{{"deviceId": 3}},
		map[string]any{"deviceId": 3},
	} {
		r := do(t, http.MethodPost, base+"/devices", "", bad)
		require.Equal(t, http.StatusBadRequest, r.status, "%v", bad)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
	}
	require.Len(t, e.sim.Devices(), 2)
	require.Empty(t, e.sim.RequestsFor(0), "admin requests are not logged")
}

func TestAdminFaults(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(1, "ON", "old"))
	base := e.srv.URL + "/_sim/faults"
	r := do(t, http.MethodPost, base, "", map[string]any{"kind": "delayed_tag_writes", "deviceId": 1, "delay": "10s", "for": "1m"})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	r = do(t, http.MethodPost, base, "", map[string]any{"kind": "server_error", "status": 503, "count": 2})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))

	faults := decode[[]map[string]any](t, do(t, http.MethodGet, base, "", nil))
	require.Equal(t, []map[string]any{
		{"kind": "delayed_tag_writes", "deviceId": float64(1), "delay": "10s", "for": "1m0s"},
		{"kind": "server_error", "status": float64(503), "count": float64(2)},
	}, faults)
	require.Equal(t, []hivelocitysim.Fault{
		{Kind: hivelocitysim.FaultDelayedTagWrites, DeviceID: 1, Delay: 10 * time.Second, For: time.Minute},
		{Kind: hivelocitysim.FaultServerError, Status: 503, Count: 2},
	}, e.sim.Faults())

	for _, bad := range []map[string]any{
		{"kind": "meteor"},
		{"kind": "stale_list", "maxAge": 10},
		{"kind": "stale_list", "maxAge": "soon"},
		{"kind": "stale_list", "maxAge": "10s", "colour": "red"},
	} {
		require.Equal(t, http.StatusBadRequest, do(t, http.MethodPost, base, "", bad).status, "%v", bad)
	}

	require.Equal(t, http.StatusNoContent, do(t, http.MethodDelete, base+"?kind=delayed_tag_writes&deviceId=1", "", nil).status)
	require.Equal(t, http.StatusNotFound, do(t, http.MethodDelete, base+"?kind=delayed_tag_writes&deviceId=1", "", nil).status)
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodDelete, base+"?kind=server_error&deviceId=x", "", nil).status)
	require.Len(t, e.sim.Faults(), 1)
	require.Equal(t, http.StatusNoContent, do(t, http.MethodDelete, base, "", nil).status)
	require.Empty(t, decode[[]hivelocitysim.Fault](t, do(t, http.MethodGet, base, "", nil)))
}

func TestAdminSettings(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(1, "ON"))
	base := e.srv.URL + "/_sim"
	api := e.srv.URL + "/device/1"

	require.Equal(t, http.StatusOK, do(t, http.MethodGet, api, testKey, nil).status)
	require.Equal(t, http.StatusNoContent, do(t, http.MethodPut, base+"/api-keys", "", map[string]any{"keys": []string{"rotated"}}).status)
	require.Equal(t, http.StatusUnauthorized, do(t, http.MethodGet, api, testKey, nil).status, "the old key is refused")
	require.Equal(t, http.StatusOK, do(t, http.MethodGet, api, "rotated", nil).status)

	require.Equal(t, http.StatusNoContent, do(t, http.MethodPut, base+"/time-scale", "", map[string]any{"timeScale": 100}).status)
	require.Equal(t, map[string]float64{"timeScale": 100}, decode[map[string]float64](t, do(t, http.MethodGet, base+"/time-scale", "", nil)))
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodPut, base+"/time-scale", "", map[string]any{"timeScale": 0}).status)

	r := do(t, http.MethodPut, base+"/rate-limit", "", map[string]any{"limit": 1, "window": "1m", "resetUnix": true})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	r = do(t, http.MethodGet, api, "rotated", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "1", r.header.Get(hivelocitysim.HeaderRateLimitLimit))
	require.Equal(t, "1772618460", r.header.Get(hivelocitysim.HeaderRateLimitReset), "the Unix time of epoch + 1m")
	require.Equal(t, http.StatusTooManyRequests, do(t, http.MethodGet, api, "rotated", nil).status)
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodPut, base+"/rate-limit", "", map[string]any{"limit": -1}).status)

	r = do(t, http.MethodPost, base+"/ssh-keys", "", []hivelocitysim.SSHKey{{ID: 9, Name: "ops", PublicKey: "ssh-ed25519 AAAA ops"}})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodPost, base+"/ssh-keys", "", []hivelocitysim.SSHKey{{Name: "no id"}}).status)
	r = do(t, http.MethodPost, base+"/products", "", []hivelocitysim.Product{{ID: 700, Name: "GPU", OperatingSystems: []string{"Ubuntu 24.x"}}})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodPost, base+"/products", "", []hivelocitysim.Product{{ID: 701}}).status)
	require.NoError(t, e.sim.SetRateLimit(hivelocitysim.RateLimit{}))
	r = do(t, http.MethodGet, e.srv.URL+"/product/700/operating-systems", "rotated", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Empty(t, r.header.Get(hivelocitysim.HeaderRateLimitLimit), "rate limiting off")
	require.Equal(t, http.StatusOK, do(t, http.MethodGet, e.srv.URL+"/ssh_key/9", "rotated", nil).status)

	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, base+"/nothing", "", nil).status)
}

func TestAdminRequests(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(1, "ON"), device(2, "ON"))
	for _, id := range []int32{1, 2, 1} {
		e.dump(t, id)
	}
	_, _, err := e.api.DeviceApi.GetPowerResource(e.ctx, 1, nil)
	require.NoError(t, err)
	base := e.srv.URL + "/_sim/requests"
	require.Len(t, decode[[]hivelocitysim.Request](t, do(t, http.MethodGet, base, "", nil)), 4)
	got := decode[[]hivelocitysim.Request](t, do(t, http.MethodGet, base+"?deviceId=1&op=GetDeviceId", "", nil))
	require.Equal(t, []int64{1, 3}, seqs(got))
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodGet, base+"?deviceId=one", "", nil).status)
	require.Equal(t, http.StatusNoContent, do(t, http.MethodDelete, base, "", nil).status)
	require.Empty(t, decode[[]hivelocitysim.Request](t, do(t, http.MethodGet, base, "", nil)))
}
