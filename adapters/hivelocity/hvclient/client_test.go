package hvclient_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

const testKey = "test-key"

// env is a simulator on a fake clock and a client of it.
type env struct {
	sim    *hivelocitysim.Simulator
	clk    *testingclock.FakeClock
	client *hvclient.Client
	key    string // the API key file
}

func newEnv(tb testing.TB, devices ...hivelocitysim.Device) *env {
	tb.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC))
	sim := hivelocitysim.New(hivelocitysim.Options{Clock: clk, APIKeys: []string{testKey},
		SSHKeys: []hivelocitysim.SSHKey{{ID: 7, Name: "ops", PublicKey: "ssh-ed25519 AAAA ops"}}})
	require.NoError(tb, sim.Seed(devices...))
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(srv.Close)
	e := &env{sim: sim, clk: clk, key: filepath.Join(tb.TempDir(), "key")}
	e.writeKey(tb, testKey)
	var err error
	e.client, err = hvclient.New(hvclient.Config{URL: srv.URL + "/api/v2", APIKeyFile: e.key, Timeout: 5 * time.Second})
	require.NoError(tb, err)
	return e
}

func (e *env) writeKey(tb testing.TB, key string) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(e.key, []byte(key+"\n"), 0o600))
	// The client looks at the file at most once a second; make the change visible to its stat at once.
	future := time.Now().Add(time.Duration(len(key)) * time.Second)
	require.NoError(tb, os.Chtimes(e.key, future, future))
}

func spare(id int32, power string, tags ...string) hivelocitysim.Device {
	return hivelocitysim.Device{ID: id, LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker, OSName: "Ubuntu 20.x",
		PowerStatus: power, PrimaryIP: "192.0.2.10", Tags: tags}
}

func TestClientCallsTheAPIAsTheSimulatorServesIt(t *testing.T) {
	e := newEnv(t, spare(1001, hivelocitysim.PowerOn, "caphv-use=allow", "caphvlabel:deviceType=s1"), spare(1002, hivelocitysim.PowerOff))
	ctx := context.Background()

	list, err := e.client.ListDevices(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, hvclient.Device{ID: 1001, Hostname: "device-1001.hivelocity.example", Location: "LAX2", ProductID: hivelocitysim.DemoProductWorker,
		ProductName: "Instant Dedicated E-2288G 64GB", PrimaryIP: "192.0.2.10", Power: hvclient.PowerOn, OSName: "Ubuntu 20.x",
		Tags: []string{"caphv-use=allow", "caphvlabel:deviceType=s1"}}, list[0])

	d, err := e.client.GetDevice(ctx, 1002)
	require.NoError(t, err)
	require.Equal(t, hvclient.PowerOff, d.Power)

	require.NoError(t, e.client.SetTags(ctx, 1002, []string{"a=b"}))
	st, err := e.client.Status(ctx, 1002)
	require.NoError(t, err)
	require.Equal(t, hvclient.Status{ID: 1002, Power: hvclient.PowerOff, SPSStatus: hivelocitysim.StatusInUse, Location: "LAX2", Tags: []string{"a=b"}}, st)
	require.NoError(t, e.client.SetTags(ctx, 1002, nil), "an empty list clears the tags")
	st, err = e.client.Status(ctx, 1002)
	require.NoError(t, err)
	require.Empty(t, st.Tags)

	keys, err := e.client.SSHKeys(ctx)
	require.NoError(t, err)
	require.Equal(t, []hvclient.SSHKey{{ID: 7, Name: "ops"}}, keys)
	systems, err := e.client.OperatingSystems(ctx, hivelocitysim.DemoProductWorker)
	require.NoError(t, err)
	require.Contains(t, systems, "Ubuntu 22.x")

	require.NoError(t, e.client.Reload(ctx, 1002, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "w-0.c.example.com", Script: "#cloud-config\n",
		SSHKeyID: 7, Tags: []string{"x=y"}}))
	st, err = e.client.Status(ctx, 1002)
	require.NoError(t, err)
	require.True(t, st.Reloading)
	require.Equal(t, []string{"x=y"}, st.Tags)
	got, _ := e.sim.Device(1002)
	require.Equal(t, "#cloud-config\n", got.Script)
	require.Equal(t, int32(7), got.PublicSSHKeyID)

	require.NoError(t, e.client.Power(ctx, 1001, hvclient.PowerShutdown))
	e.clk.Step(2 * time.Minute)
	d, err = e.client.GetDevice(ctx, 1001)
	require.NoError(t, err)
	require.Equal(t, hvclient.PowerOff, d.Power)
	require.NoError(t, e.client.Reload(ctx, 1001, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "w-1.c.example.com"}))
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(tb testing.TB, e *env)
		call       func(ctx context.Context, c *hvclient.Client) error
		want       error
		wantStatus int
	}{
		{
			name: "unknown device",
			call: func(ctx context.Context, c *hvclient.Client) error { _, err := c.GetDevice(ctx, 9999); return err },
			want: hvclient.ErrNotFound, wantStatus: 404,
		},
		{
			name:  "wrong key",
			setup: func(_ testing.TB, e *env) { e.sim.SetAPIKeys("someone-else") },
			call:  func(ctx context.Context, c *hvclient.Client) error { _, err := c.ListDevices(ctx); return err },
			want:  hvclient.ErrUnauthorized, wantStatus: 401,
		},
		{
			name: "reload of a device that is on",
			call: func(ctx context.Context, c *hvclient.Client) error {
				return c.Reload(ctx, 1001, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "w-0.c.example.com"})
			},
			want: hvclient.ErrRejected, wantStatus: 400,
		},
		{
			name: "reload of a device already reloading",
			setup: func(tb testing.TB, e *env) {
				require.NoError(tb, e.client.Reload(context.Background(), 1002, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "w-1.c.example.com"}))
			},
			call: func(ctx context.Context, c *hvclient.Client) error {
				return c.Reload(ctx, 1002, hvclient.Reload{OSName: "Ubuntu 22.x", Hostname: "w-1.c.example.com"})
			},
			want: hvclient.ErrRejected, wantStatus: 409,
		},
		{
			name: "shutdown of a device that is off",
			call: func(ctx context.Context, c *hvclient.Client) error { return c.Power(ctx, 1002, hvclient.PowerShutdown) },
			want: hvclient.ErrRejected, wantStatus: 400,
		},
		{
			name: "a proxy's 502 page",
			setup: func(tb testing.TB, e *env) {
				require.NoError(tb, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultServerError}))
			},
			call: func(ctx context.Context, c *hvclient.Client) error { _, err := c.ListDevices(ctx); return err },
			want: hvclient.ErrUnavailable, wantStatus: 502,
		},
		{
			name: "a 429 storm",
			setup: func(tb testing.TB, e *env) {
				require.NoError(tb, e.sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultRateLimitStorm}))
			},
			call: func(ctx context.Context, c *hvclient.Client) error { _, err := c.ListDevices(ctx); return err },
			want: hvclient.ErrRateLimited, wantStatus: 429,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, spare(1001, hivelocitysim.PowerOn), spare(1002, hivelocitysim.PowerOff))
			if tt.setup != nil {
				tt.setup(t, e)
			}
			err := tt.call(context.Background(), e.client)
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, tt.wantStatus, hvclient.StatusOf(err))
			require.NotEmpty(t, err.Error())
		})
	}
}

func TestClientPausesEveryCallUntilTheRateLimitResets(t *testing.T) {
	e := newEnv(t, spare(1001, hivelocitysim.PowerOn))
	require.NoError(t, e.sim.SetRateLimit(hivelocitysim.RateLimit{Limit: 2, Window: time.Hour}))
	ctx := context.Background()
	_, err := e.client.ListDevices(ctx)
	require.NoError(t, err)
	// The second request is the window's last: its X-RateLimit-Remaining of 0 pauses every call until the reset.
	_, err = e.client.GetDevice(ctx, 1001)
	require.NoError(t, err)
	before := len(e.sim.Requests())
	_, err = e.client.Status(ctx, 1001)
	require.ErrorIs(t, err, hvclient.ErrRateLimited)
	require.InDelta(t, time.Hour.Seconds(), hvclient.RetryAfter(err).Seconds(), 5)
	require.InDelta(t, time.Hour.Seconds(), e.client.PausedFor().Seconds(), 5)
	require.Len(t, e.sim.Requests(), before, "a paused call reached the API")
}

func TestClientReadsARotatedKey(t *testing.T) {
	e := newEnv(t, spare(1001, hivelocitysim.PowerOn))
	ctx := context.Background()
	e.sim.SetAPIKeys("rotated")
	_, err := e.client.ListDevices(ctx)
	require.ErrorIs(t, err, hvclient.ErrUnauthorized)
	e.writeKey(t, "rotated")
	_, err = e.client.ListDevices(ctx)
	require.NoError(t, err, "the 401 made the client read the key file again")
}

func TestNewRefusesAMissingKey(t *testing.T) {
	_, err := hvclient.New(hvclient.Config{URL: "http://127.0.0.1:1", APIKeyFile: filepath.Join(t.TempDir(), "none")})
	require.ErrorIs(t, err, hvclient.ErrUnauthorized)
	_, err = hvclient.New(hvclient.Config{URL: "core.hivelocity.net", APIKeyFile: "x"})
	require.Error(t, err)
}
