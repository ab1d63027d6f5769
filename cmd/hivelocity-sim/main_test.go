package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	hv "github.com/hivelocity/hivelocity-client-go/client"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
)

func writeFile(tb testing.TB, name, content string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	require.NoError(tb, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestCommandRefusesBadSettings(t *testing.T) {
	emptyKeys := writeFile(t, "keys", "# none\n\n")
	badSeed := writeFile(t, "seed.json", `[{"deviceId": 1}]`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"zero time scale", []string{"--time-scale", "0"}, "--time-scale"},
		{"unknown log level", []string{"--log-level", "loud"}, "--log-level"},
		{"unknown reset format", []string{"--rate-limit-reset", "epoch"}, "--rate-limit-reset"},
		{"zero rate window", []string{"--rate-limit-window", "0s"}, "--rate-limit-window"},
		{"negative rate limit", []string{"--rate-limit", "-1"}, "--rate-limit"},
		{"missing key file", []string{"--api-key-file", "/nonexistent/keys"}, "--api-key-file"},
		{"key file without keys", []string{"--api-key-file", emptyKeys}, "no keys"},
		{"missing seed file", []string{"--seed-file", "/nonexistent/seed.json"}, "--seed-file"},
		{"invalid seed device", []string{"--seed-file", badSeed}, "locationName"},
		{"bad listen address", []string{"--listen", "256.0.0.1:http"}, "listen"},
		{"unknown flag", []string{"--seed-demos"}, "unknown flag"},
		{"positional argument", []string{"serve"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A cancelled context makes a command that wrongly accepts its flags return at once instead of serving.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			cmd := newCommand()
			cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0"}, tt.args...))
			cmd.SetErr(io.Discard)
			err := cmd.ExecuteContext(ctx)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestVersion(t *testing.T) {
	cmd := newCommand()
	cmd.SetArgs([]string{"--version"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	require.NoError(t, cmd.Execute())
	require.Equal(t, "hivelocity-sim version dev (unknown)\n", out.String())
}

// logLines collects the JSON log lines a running command writes and reports the address it serves on.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	addr  chan string
	done  chan struct{}
}

func readLogs(r io.Reader) *logLines {
	l := &logLines{addr: make(chan string, 1), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			l.mu.Lock()
			l.lines = append(l.lines, line)
			l.mu.Unlock()
			if line["msg"] == "serving" {
				l.addr <- line["addr"].(string)
			}
		}
	}()
	return l
}

func (l *logLines) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		out = append(out, line["msg"].(string))
	}
	return out
}

func TestCommandServesUntilCancelled(t *testing.T) {
	keys := writeFile(t, "keys", "k1\n")
	seed := writeFile(t, "seed.json", `[{"deviceId": 5000, "locationName": "TPA1", "productId": 504, "tags": ["caphv-use=allow"]}]`)
	cmd := newCommand()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--seed-demo", "--seed-file", seed, "--api-key-file", keys,
		"--time-scale", "100", "--log-level", "debug", "--rate-limit", "50", "--rate-limit-reset", "unix"})
	pr, pw := io.Pipe()
	cmd.SetErr(pw)
	logs := readLogs(pr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	var base string
	select {
	case addr := <-logs.addr:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("command ended before serving: %v", err)
	}
	cfg := hv.NewConfiguration()
	cfg.BasePath = base + "/api/v2"
	api := hv.NewAPIClient(cfg)
	keyCtx := context.WithValue(context.Background(), hv.ContextAPIKey, hv.APIKey{Key: "k1"})

	devices, resp, err := api.BareMetalDevicesApi.GetBareMetalDeviceResource(keyCtx, nil)
	require.NoError(t, err)
	require.Len(t, devices, 13, "the demo fleet and the seed file")
	require.Equal(t, "50", resp.Header.Get(hivelocitysim.HeaderRateLimitLimit))
	require.Greater(t, len(resp.Header.Get(hivelocitysim.HeaderRateLimitReset)), 9, "a Unix time")
	keys2, _, err := api.SshKeyApi.GetSshKeyResource(keyCtx, nil)
	require.NoError(t, err)
	require.Equal(t, "hyperfleet-dev", keys2[0].Name)
	_, _, err = api.SshKeyApi.GetSshKeyResource(context.WithValue(context.Background(), hv.ContextAPIKey, hv.APIKey{Key: "dev"}), nil)
	require.Error(t, err, "the key file replaces the default key")

	r, err := http.Get(base + "/_sim/time-scale")
	require.NoError(t, err)
	var scale map[string]float64
	require.NoError(t, json.NewDecoder(r.Body).Decode(&scale))
	_ = r.Body.Close()
	require.Equal(t, map[string]float64{"timeScale": 100}, scale)

	cancel()
	require.NoError(t, <-done)
	require.NoError(t, pw.Close())
	<-logs.done
	msgs := logs.messages()
	require.Contains(t, msgs, "api request", "--log-level debug logs every request")
	require.Equal(t, "shutting down", msgs[len(msgs)-1])
}

func TestWatchKeysFollowsTheKeyFile(t *testing.T) {
	path := writeFile(t, "keys", "k1\n")
	initial, err := os.ReadFile(path)
	require.NoError(t, err)
	sim := hivelocitysim.New(hivelocitysim.Options{APIKeys: []string{"k1"}})
	h := sim.Handler()
	status := func(key string) int {
		req := httptest.NewRequest(http.MethodGet, "/ssh_key/", http.NoBody)
		req.Header.Set(hivelocitysim.HeaderAPIKey, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	var logs logbuf.Buffer
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchKeys(ctx, clk, path, time.Second, initial, sim, slog.New(slog.NewJSONHandler(&logs, nil)))
	}()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "the watcher's ticker")

	steps := []struct {
		name    string
		content *string // nil removes the file
		logged  string
		valid   []string
		invalid []string
	}{
		{"rotated", ptr("k2\nk3\n"), "api keys reloaded", []string{"k2", "k3"}, []string{"k1"}},
		{"emptied", ptr(""), "holds no key", []string{"k2", "k3"}, nil},
		{"removed", nil, "unreadable", []string{"k2", "k3"}, nil},
		{"restored", ptr("k1\n"), "api keys reloaded", []string{"k1"}, []string{"k2"}},
	}
	for _, st := range steps {
		if st.content == nil {
			require.NoError(t, os.Remove(path))
		} else {
			require.NoError(t, os.WriteFile(path, []byte(*st.content), 0o600))
		}
		before := strings.Count(logs.String(), st.logged)
		clk.Step(time.Second)
		require.Eventually(t, func() bool { return strings.Count(logs.String(), st.logged) > before }, 5*time.Second, time.Millisecond, st.name)
		for _, k := range st.valid {
			require.Equal(t, http.StatusOK, status(k), "%s: %s", st.name, k)
		}
		for _, k := range st.invalid {
			require.Equal(t, http.StatusUnauthorized, status(k), "%s: %s", st.name, k)
		}
	}
	cancel()
	<-done
}

func ptr(s string) *string { return &s }

// TestStateFileSurvivesRestart runs the command twice on one state file: the first run seeds the demo fleet and
// takes a device; the second finds the device still taken and does not seed again.
func TestStateFileSurvivesRestart(t *testing.T) {
	state := filepath.Join(t.TempDir(), "dev", "hivelocity.json")
	start := func() (base string, stop func() []string) {
		cmd := newCommand()
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--seed-demo", "--state-file", state})
		pr, pw := io.Pipe()
		cmd.SetErr(pw)
		logs := readLogs(pr)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		select {
		case addr := <-logs.addr:
			base = "http://" + addr
		case err := <-done:
			cancel()
			t.Fatalf("command ended before serving: %v", err)
		}
		return base, func() []string {
			cancel()
			require.NoError(t, <-done)
			require.NoError(t, pw.Close())
			<-logs.done
			return logs.messages()
		}
	}
	tagsOf := func(base string, id int32) []string {
		d := adminDevice(t, base, id)
		return d.Tags
	}

	base, stop := start()
	req, err := http.NewRequest(http.MethodPut, base+"/device/1001/tags", strings.NewReader(`{"tags":["caphv-use=allow","owner=demo"]}`))
	require.NoError(t, err)
	req.Header.Set(hivelocitysim.HeaderAPIKey, defaultAPIKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	first := stop()
	require.Contains(t, first, "devices seeded")

	base, stop = start()
	require.Equal(t, []string{"caphv-use=allow", "owner=demo"}, tagsOf(base, 1001))
	require.Len(t, adminDevices(t, base), 12)
	second := stop()
	require.Contains(t, second, "state restored; seeding skipped")
	require.NotContains(t, second, "devices seeded")
}

func adminDevices(tb testing.TB, base string) []hivelocitysim.DeviceState {
	tb.Helper()
	resp, err := http.Get(base + "/_sim/devices")
	require.NoError(tb, err)
	defer func() { _ = resp.Body.Close() }()
	var out []hivelocitysim.DeviceState
	require.NoError(tb, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func adminDevice(tb testing.TB, base string, id int32) hivelocitysim.DeviceState {
	tb.Helper()
	for _, d := range adminDevices(tb, base) {
		if d.ID == id {
			return d
		}
	}
	tb.Fatalf("no device %d", id)
	return hivelocitysim.DeviceState{}
}
