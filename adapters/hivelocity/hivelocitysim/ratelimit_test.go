package hivelocitysim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

func TestRateLimitBudgets(t *testing.T) {
	rl := hivelocitysim.RateLimit{Limit: 3, AnonymousLimit: 2, Window: time.Minute}
	e := newEnv(t, hivelocitysim.Options{RateLimit: rl, APIKeys: []string{"k1", "k2"}}, device(7, hivelocitysim.PowerOn))
	url := e.srv.URL + "/device/7/power"
	type answer struct {
		status           int
		limit, remaining string
	}
	get := func(key string) answer {
		r := do(t, http.MethodGet, url, key, nil)
		return answer{r.status, r.header.Get(hivelocitysim.HeaderRateLimitLimit), r.header.Get(hivelocitysim.HeaderRateLimitRemaining)}
	}
	steps := []struct {
		key  string
		want answer
	}{
		{"k1", answer{200, "3", "2"}},
		{"k1", answer{200, "3", "1"}},
		{"k2", answer{200, "3", "2"}}, // every key has its own budget
		{"k1", answer{200, "3", "0"}},
		{"k1", answer{429, "3", "0"}},
		{"", answer{401, "2", "1"}}, // requests without a valid key share the anonymous budget
		{"wrong", answer{401, "2", "0"}},
		{"", answer{429, "2", "0"}},
		{"k2", answer{200, "3", "1"}},
	}
	for i, st := range steps {
		require.Equal(t, st.want, get(st.key), "step %d (%q)", i, st.key)
	}
	e.clk.Step(time.Minute)
	require.Equal(t, answer{200, "3", "2"}, get("k1"), "a new window starts with the next request")
	require.Equal(t, answer{401, "2", "1"}, get(""))
}

func TestRateLimitWindowStartsWithFirstRequest(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{RateLimit: hivelocitysim.DocumentedRateLimit()}, device(7, hivelocitysim.PowerOn))
	url := e.srv.URL + "/device/7"
	e.clk.Step(10 * time.Minute)
	r := do(t, http.MethodGet, url, testKey, nil)
	require.Equal(t, "3600", r.header.Get(hivelocitysim.HeaderRateLimitReset))
	require.Equal(t, "3599", r.header.Get(hivelocitysim.HeaderRateLimitRemaining))
	e.clk.Step(59*time.Minute + 59*time.Second + 500*time.Millisecond)
	r = do(t, http.MethodGet, url, testKey, nil)
	require.Equal(t, "1", r.header.Get(hivelocitysim.HeaderRateLimitReset), "rounded up")
	require.Equal(t, "3598", r.header.Get(hivelocitysim.HeaderRateLimitRemaining))
}

func TestUnknownPathsAndIDs(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	tests := []struct {
		method, path, key string
		status            int
	}{
		{http.MethodGet, "/bare-metal-devices", testKey, 200}, // the router redirects to the trailing-slash path
		{http.MethodGet, "/device/abc", testKey, 404},
		{http.MethodGet, "/device/-7", testKey, 404},
		{http.MethodGet, "/device/99999999999", testKey, 404},
		{http.MethodGet, "/nothing", "", 404},
		{http.MethodDelete, "/device/7", testKey, 404},
		{http.MethodGet, "/api/v2/device/7", testKey, 200},
		{http.MethodGet, "/api/v2/device/7", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := do(t, tt.method, e.srv.URL+tt.path, tt.key, nil)
			require.Equal(t, tt.status, r.status, string(r.body))
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
		})
	}
}

func TestMalformedBodies(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOff))
	tests := []struct {
		method, path string
		body         any
	}{
		{http.MethodPut, "/device/7/tags", nil},
		{http.MethodPut, "/device/7/tags", map[string]any{"tags": "a,b"}},
		{http.MethodPut, "/bare-metal-devices/7", nil},
		{http.MethodPut, "/bare-metal-devices/7", map[string]any{"hostname": "a.example.com"}},
		{http.MethodPut, "/bare-metal-devices/7?skipPowerCheck=maybe", map[string]any{"hostname": "a.example.com", "osName": "Ubuntu 22.x"}},
		{http.MethodPost, "/device/7/power", nil},
	}
	for _, tt := range tests {
		r := do(t, tt.method, e.srv.URL+tt.path, testKey, tt.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s %s %v: %s", tt.method, tt.path, tt.body, r.body)
	}
	require.False(t, e.state(t, 7).IsReload)
}
