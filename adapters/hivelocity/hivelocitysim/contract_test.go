package hivelocitysim_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

// The contract tests drive the official client through every operation the provisioner uses: they fail if a path,
// method, body key, number type or content type is not what hivelocity-client-go v0.2.0 sends and expects.

func TestContractReads(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{SSHKeys: hivelocitysim.DemoSSHKeys()}, hivelocitysim.DemoDevices()...)
	want := hivelocitysim.DemoDevices()[0]

	for _, basePath := range []string{"", "/api/v2"} {
		t.Run("base path "+basePath, func(t *testing.T) {
			api := newClient(e.srv, basePath)
			list, resp, err := api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
			require.NoError(t, err)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Len(t, list, 12)
			require.Equal(t, hv.BareMetalDevice{
				LocationName: "LAX2", ServiceId: want.ServiceID, PrimaryIp: want.PrimaryIP, DeviceId: want.ID,
				OrderId: want.OrderID, PowerStatus: "ON", OsName: "Ubuntu 20.x", Hostname: want.Hostname,
				ProductName: "Instant Dedicated E3-1230 v6 32GB", Tags: want.Tags, ProductId: want.ProductID,
				Period: "monthly",
			}, list[0])
		})
	}

	t.Run("GetBareMetalDeviceIdResource", func(t *testing.T) {
		d, resp, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceIdResource(e.ctx, want.ID, nil)
		require.NoError(t, err)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, want.ID, d.DeviceId)
		require.Equal(t, want.Tags, d.Tags)
	})
	t.Run("GetDeviceIdResource", func(t *testing.T) {
		d := e.dump(t, want.ID)
		require.Equal(t, want.ID, d.DeviceId)
		require.Equal(t, "ON", d.PowerStatus)
		require.False(t, d.IsReload)
		require.Equal(t, hivelocitysim.StatusInUse, d.SpsStatus)
		require.Equal(t, want.Hostname, d.Hostname)
		require.Equal(t, want.Tags, d.Tags)
		require.Equal(t, want.PrimaryIP, d.PrimaryIp)
		require.Equal(t, map[string]any{"facilityCode": "LAX2"}, d.Location)
	})
	t.Run("GetDeviceTagIdResource", func(t *testing.T) {
		tags, _, err := e.api.DeviceApi.GetDeviceTagIdResource(e.ctx, want.ID, nil)
		require.NoError(t, err)
		require.Equal(t, want.Tags, tags.Tags)
	})
	t.Run("GetPowerResource", func(t *testing.T) {
		p, _, err := e.api.DeviceApi.GetPowerResource(e.ctx, want.ID, nil)
		require.NoError(t, err)
		require.Equal(t, hv.DevicePower{PowerStatus: "ON"}, p)
	})
	t.Run("GetSshKeyResource", func(t *testing.T) {
		keys, _, err := e.api.SshKeyApi.GetSshKeyResource(e.ctx, nil)
		require.NoError(t, err)
		k := hivelocitysim.DemoSSHKeys()[0]
		require.Equal(t, []hv.SshKeyResponse{{Name: k.Name, SshKeyId: k.ID, PublicKey: k.PublicKey}}, keys)
	})
	t.Run("GetSshKeyIdResource", func(t *testing.T) {
		k, _, err := e.api.SshKeyApi.GetSshKeyIdResource(e.ctx, 1, nil)
		require.NoError(t, err)
		require.Equal(t, "hyperfleet-dev", k.Name)
		_, _, err = e.api.SshKeyApi.GetSshKeyIdResource(e.ctx, 99, nil)
		requireAPIError(t, err, http.StatusNotFound)
	})
	t.Run("GetProductOperatingSystemsResource", func(t *testing.T) {
		opts, _, err := e.api.ProductApi.GetProductOperatingSystemsResource(e.ctx, hivelocitysim.DemoProductWorker, nil)
		require.NoError(t, err)
		var names []string
		for _, o := range opts {
			require.NotZero(t, o.Id)
			names = append(names, o.Name)
		}
		require.Equal(t, hivelocitysim.DefaultOperatingSystems(), names)
		_, _, err = e.api.ProductApi.GetProductOperatingSystemsResource(e.ctx, 1, nil)
		requireAPIError(t, err, http.StatusNotFound)
	})
}

func TestContractTagsReplaceTheList(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn, "caphv-use=allow", "keep"))
	steps := []struct {
		name string
		put  []string
		want []string
	}{
		{"replace", []string{"a", "b"}, []string{"a", "b"}},
		{"no merge", []string{"c"}, []string{"c"}},
		{"order kept", []string{"z", "c", "a"}, []string{"z", "c", "a"}},
		{"clear (the client omits an empty list)", nil, []string{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, resp, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 7, hv.DeviceTag{Tags: st.put}, nil)
			require.NoError(t, err)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.ElementsMatch(t, st.want, got.Tags)
			read, _, err := e.api.DeviceApi.GetDeviceTagIdResource(e.ctx, 7, nil)
			require.NoError(t, err)
			require.ElementsMatch(t, st.want, read.Tags)
			require.Equal(t, st.want, e.state(t, 7).Tags)
		})
	}
}

func TestContractPower(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	require.Equal(t, hv.DevicePower{PowerStatus: "ON"}, e.power(t, 7, "shutdown"), "the answer is the state before the action")

	_, _, err := e.api.DeviceApi.PostPowerResource(e.ctx, 7, "boot", nil)
	swaggerErr := requireAPIError(t, err, http.StatusBadRequest)
	require.Equal(t, "Can't do this while server is powered on.", errorBody(t, swaggerErr)["message"], "still ON until the shutdown is done")

	e.clk.Step(testDurations.Shutdown)
	p, _, err := e.api.DeviceApi.GetPowerResource(e.ctx, 7, nil)
	require.NoError(t, err)
	require.Equal(t, "OFF", p.PowerStatus)

	_, _, err = e.api.DeviceApi.PostPowerResource(e.ctx, 7, "shutdown", nil)
	swaggerErr = requireAPIError(t, err, http.StatusBadRequest)
	require.Equal(t, "Can't do this while server is powered off.", errorBody(t, swaggerErr)["message"], "CAPHV matches this text")

	_, _, err = e.api.DeviceApi.PostPowerResource(e.ctx, 7, "hibernate", nil)
	requireAPIError(t, err, http.StatusBadRequest)

	require.Equal(t, hv.DevicePower{PowerStatus: "OFF"}, e.power(t, 7, "boot"))
	e.clk.Step(testDurations.Boot)
	require.Equal(t, "ON", e.dump(t, 7).PowerStatus)
}

func TestContractReload(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{SSHKeys: hivelocitysim.DemoSSHKeys()}, device(7, hivelocitysim.PowerOff, "caphv-use=allow"))
	u := spec("node-1.pool.example.com", "caphv-use=allow", "hyperfleet/cluster=c1")
	u.PublicSshKeyId = 1
	got, err := e.reload(t, 7, u, false)
	require.NoError(t, err)
	require.Equal(t, int32(7), got.DeviceId)
	require.Equal(t, "node-1.pool.example.com", got.Hostname)
	require.Equal(t, u.Tags, got.Tags)
	require.Equal(t, "#cloud-config\n", got.Script)
	require.Equal(t, int32(1), got.PublicSshKeyId)

	d := e.dump(t, 7)
	require.True(t, d.IsReload)
	require.Equal(t, "OFF", d.PowerStatus)
	require.Equal(t, hivelocitysim.StatusReloading, d.SpsStatus)
	require.Equal(t, u.Tags, d.Tags, "the tags of the PUT replace the device's")
}

func TestContractErrors(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{SSHKeys: hivelocitysim.DemoSSHKeys()},
		device(7, hivelocitysim.PowerOn), device(8, hivelocitysim.PowerOff))
	tests := []struct {
		name    string
		call    func() error
		status  int
		message string
	}{
		{"no key", func() error {
			_, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(context.Background(), nil)
			return err
		}, http.StatusUnauthorized, ""},
		{"wrong key", func() error {
			_, _, err := e.api.DeviceApi.GetDeviceIdResource(withKey("stolen"), 7, nil)
			return err
		}, http.StatusUnauthorized, ""},
		{"unknown device", func() error {
			_, _, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceIdResource(e.ctx, 404, nil)
			return err
		}, http.StatusNotFound, "Device not found"},
		{"unknown device tags", func() error {
			_, _, err := e.api.DeviceApi.PutDeviceTagIdResource(e.ctx, 404, hv.DeviceTag{Tags: []string{"x"}}, nil)
			return err
		}, http.StatusNotFound, "Device not found"},
		{"reload powered on", func() error {
			_, err := e.reload(t, 7, spec("a.example.com"), false)
			return err
		}, http.StatusBadRequest, "Device must be powered off before a reload; shut it down or pass skipPowerCheck=true."},
		{"reload OS the product lacks", func() error {
			u := spec("a.example.com")
			u.OsName = "Windows 95"
			_, err := e.reload(t, 8, u, false)
			return err
		}, http.StatusBadRequest, ""},
		{"reload hostname not an FQDN", func() error {
			_, err := e.reload(t, 8, spec("node-1"), false)
			return err
		}, http.StatusBadRequest, ""},
		{"reload unknown ssh key", func() error {
			u := spec("a.example.com")
			u.PublicSshKeyId = 42
			_, err := e.reload(t, 8, u, false)
			return err
		}, http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			swaggerErr := requireAPIError(t, tt.call(), tt.status)
			body := errorBody(t, swaggerErr)
			require.Equal(t, float64(tt.status), body["code"])
			if tt.message != "" {
				require.Equal(t, tt.message, body["message"])
			}
		})
	}
	require.False(t, e.state(t, 8).IsReload, "no refused reload started")
	require.Zero(t, e.state(t, 8).Reloads)
}

func TestContractReloadConflicts(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{}, device(7, hivelocitysim.PowerOn))
	_, err := e.reload(t, 7, spec("a.example.com"), true)
	require.NoError(t, err, "skipPowerCheck bypasses the powered-off check")

	_, err = e.reload(t, 7, spec("b.example.com"), true)
	swaggerErr := requireAPIError(t, err, http.StatusConflict)
	require.Equal(t, "Device is already reloading.", errorBody(t, swaggerErr)["message"])

	_, _, err = e.api.DeviceApi.PostPowerResource(e.ctx, 7, "boot", nil)
	requireAPIError(t, err, http.StatusConflict)
	require.Equal(t, 1, e.state(t, 7).Reloads)
}

func TestContractRateLimit(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{RateLimit: hivelocitysim.RateLimit{Limit: 2, Window: time.Minute}}, device(7, hivelocitysim.PowerOn))
	for _, remaining := range []string{"1", "0"} {
		_, resp, err := e.api.DeviceApi.GetPowerResource(e.ctx, 7, nil)
		require.NoError(t, err)
		require.Equal(t, "2", resp.Header.Get(hivelocitysim.HeaderRateLimitLimit))
		require.Equal(t, remaining, resp.Header.Get(hivelocitysim.HeaderRateLimitRemaining))
		require.Equal(t, "60", resp.Header.Get(hivelocitysim.HeaderRateLimitReset))
	}
	e.clk.Step(15 * time.Second)
	_, resp, err := e.api.DeviceApi.GetPowerResource(e.ctx, 7, nil)
	swaggerErr := requireAPIError(t, err, http.StatusTooManyRequests)
	require.True(t, strings.HasPrefix(swaggerErr.Error(), "429"), "CAPHV's rate-limit check")
	require.Equal(t, map[string]any{"code": float64(429), "description": "Your IP is rate limited."}, errorBody(t, swaggerErr))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "0", resp.Header.Get(hivelocitysim.HeaderRateLimitRemaining))
	require.Equal(t, "45", resp.Header.Get(hivelocitysim.HeaderRateLimitReset), "seconds until the window ends")

	e.clk.Step(45 * time.Second)
	_, resp, err = e.api.DeviceApi.GetPowerResource(e.ctx, 7, nil)
	require.NoError(t, err, "a new window")
	require.Equal(t, "1", resp.Header.Get(hivelocitysim.HeaderRateLimitRemaining))
}

func TestContractServerErrorIsHTML(t *testing.T) {
	e := newEnv(t, hivelocitysim.Options{RateLimit: hivelocitysim.DocumentedRateLimit()}, device(7, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError, Status: 503, Count: 1}))
	_, resp, err := e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
	swaggerErr := requireAPIError(t, err, http.StatusServiceUnavailable)
	require.Contains(t, string(swaggerErr.Body()), "<title>503 Service Unavailable</title>")
	require.Equal(t, "text/html", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get(hivelocitysim.HeaderRateLimitLimit), "the proxy answers, not the API")

	_, resp, err = e.api.BareMetalDevicesApi.GetBareMetalDeviceResource(e.ctx, nil)
	require.NoError(t, err, "the fault's count is used up")
	require.Equal(t, "3600", resp.Header.Get(hivelocitysim.HeaderRateLimitLimit))
}
