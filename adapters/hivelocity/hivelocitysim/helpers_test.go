package hivelocitysim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/antihax/optional"
	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

const testKey = "test-key"

// epoch is the fake clock's start.
var epoch = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

// testDurations make the state machine easy to follow: off 1m, installer 4m, shutdown 30s, boot 1m.
var testDurations = hivelocitysim.Durations{
	ReloadPoweredOff: time.Minute, ReloadPoweredOn: 4 * time.Minute, Shutdown: 30 * time.Second, Boot: time.Minute,
}

// env is a simulator on a fake clock, served over HTTP, with the official client pointed at it.
type env struct {
	sim *hivelocitysim.Simulator
	clk *testingclock.FakeClock
	srv *httptest.Server
	api *hv.APIClient
	ctx context.Context // carries testKey
}

// newEnv starts a simulator with testDurations, testKey and the given devices, unless opts says otherwise.
func newEnv(tb testing.TB, opts hivelocitysim.Options, devices ...hivelocitysim.Device) *env {
	tb.Helper()
	clk := testingclock.NewFakeClock(epoch)
	opts.Clock = clk
	if opts.Durations == (hivelocitysim.Durations{}) {
		opts.Durations = testDurations
	}
	if opts.APIKeys == nil {
		opts.APIKeys = []string{testKey}
	}
	sim := hivelocitysim.New(opts)
	require.NoError(tb, sim.Seed(devices...))
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(srv.Close)
	return &env{sim: sim, clk: clk, srv: srv, api: newClient(srv, ""), ctx: withKey(testKey)}
}

// newClient returns the official client for srv; basePath is appended to the server URL.
func newClient(srv *httptest.Server, basePath string) *hv.APIClient {
	cfg := hv.NewConfiguration()
	cfg.BasePath = srv.URL + basePath
	cfg.HTTPClient = srv.Client()
	return hv.NewAPIClient(cfg)
}

func withKey(key string) context.Context {
	return context.WithValue(context.Background(), hv.ContextAPIKey, hv.APIKey{Key: key})
}

// device returns a spare device in LAX2 of the demo's worker product.
func device(id int32, power string, tags ...string) hivelocitysim.Device {
	return hivelocitysim.Device{
		ID: id, LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker, OSName: "Ubuntu 20.x",
		PowerStatus: power, Tags: tags,
	}
}

// state returns the simulator's state of device id.
func (e *env) state(tb testing.TB, id int32) hivelocitysim.DeviceState {
	tb.Helper()
	d, ok := e.sim.Device(id)
	require.True(tb, ok, "device %d", id)
	return d
}

// dump reads GET /device/{id} through the client.
func (e *env) dump(tb testing.TB, id int32) hv.DeviceDump {
	tb.Helper()
	d, resp, err := e.api.DeviceApi.GetDeviceIdResource(e.ctx, id, nil)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode)
	return d
}

// reload PUTs a reload of id through the client.
func (e *env) reload(tb testing.TB, id int32, u hv.BareMetalDeviceUpdate, skipPowerCheck bool) (hv.BareMetalDevice, error) {
	tb.Helper()
	var opts *hv.BareMetalDevicesApiPutBareMetalDeviceIdResourceOpts
	if skipPowerCheck {
		opts = &hv.BareMetalDevicesApiPutBareMetalDeviceIdResourceOpts{SkipPowerCheck: optional.NewBool(true)}
	}
	d, _, err := e.api.BareMetalDevicesApi.PutBareMetalDeviceIdResource(e.ctx, id, u, opts)
	return d, err
}

// power POSTs a power action through the client and requires it accepted.
func (e *env) power(tb testing.TB, id int32, action string) hv.DevicePower {
	tb.Helper()
	p, resp, err := e.api.DeviceApi.PostPowerResource(e.ctx, id, action, nil)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusAccepted, resp.StatusCode)
	return p
}

// spec is a valid reload body.
func spec(hostname string, tags ...string) hv.BareMetalDeviceUpdate {
	return hv.BareMetalDeviceUpdate{OsName: "Ubuntu 22.x", Hostname: hostname, Tags: tags, Script: "#cloud-config\n", ForceReload: true}
}

// requireAPIError requires err to be the client's error for an answer with the given status (its message is the
// status line, which CAPHV matches with strings.HasPrefix(err.Error(), "429")) and returns it.
func requireAPIError(tb testing.TB, err error, status int) hv.GenericSwaggerError {
	tb.Helper()
	require.Error(tb, err)
	var swaggerErr hv.GenericSwaggerError
	require.True(tb, errors.As(err, &swaggerErr), "error %T %v is not the client's", err, err)
	require.Equal(tb, fmt.Sprintf("%d %s", status, http.StatusText(status)), swaggerErr.Error())
	return swaggerErr
}

// errorBody decodes the JSON error body of a client error.
func errorBody(tb testing.TB, swaggerErr hv.GenericSwaggerError) map[string]any {
	tb.Helper()
	var body map[string]any
	require.NoError(tb, json.Unmarshal(swaggerErr.Body(), &body), string(swaggerErr.Body()))
	return body
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request (for what the client cannot express) with key as X-API-KEY unless empty.
func do(tb testing.TB, method, url, key string, body any) rawResponse {
	tb.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(tb, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(tb, err)
	if key != "" {
		req.Header.Set(hivelocitysim.HeaderAPIKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return rawResponse{resp.StatusCode, resp.Header, b}
}
