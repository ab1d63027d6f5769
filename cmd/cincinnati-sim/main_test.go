package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/test/logbuf"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/internal/command"
)

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stable-4.16_amd64.json"), []byte(`{"version":1,"nodes":[{"version":"4.16.1","payload":"p"}],"edges":[]}`), 0o600))
	series := cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3, Arches: []string{"amd64"}}
	tests := []struct {
		name    string
		cfg     config
		wantErr bool
		check   func(t *testing.T, sim *cincinnatisim.Simulator)
	}{
		{"series only", config{series: series}, false, func(t *testing.T, sim *cincinnatisim.Simulator) {
			g, ok := sim.Graph("stable-4.16", "amd64")
			require.True(t, ok)
			require.Len(t, g.Nodes, 6)
		}},
		{"fixture overrides series", config{series: series, fixtures: dir}, false, func(t *testing.T, sim *cincinnatisim.Simulator) {
			g, ok := sim.Graph("stable-4.16", "amd64")
			require.True(t, ok)
			require.Len(t, g.Nodes, 1)
			_, ok = sim.Graph("stable-4.15", "amd64")
			require.True(t, ok)
		}},
		{"missing fixtures dir", config{fixtures: filepath.Join(dir, "nope")}, true, nil},
		{"bad series", config{series: cincinnatisim.Series{Minors: []string{"x"}, Patches: 1}}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, err := newSimulator(tt.cfg, slog.New(slog.DiscardHandler))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			tt.check(t, sim)
		})
	}
}

func TestServeShutsDownOnCancel(t *testing.T) {
	sim, err := newSimulator(config{series: cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 2}}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- command.Serve(ctx, ln, sim.Handler(), slog.New(slog.DiscardHandler)) }()

	resp, err := http.Get("http://" + ln.Addr().String() + cincinnatisim.GraphPath + "?channel=stable-4.16&arch=amd64")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
}

func TestVersion(t *testing.T) {
	cmd := newCommand()
	cmd.SetArgs([]string{"--version"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	require.NoError(t, cmd.Execute())
	require.Equal(t, "cincinnati-sim version dev (unknown)\n", out.String())
}

// TestCommandLogsJSON runs the command as the binary would, publishes a release through the admin endpoint, stops
// it, and checks that every line it logged is a JSON object with the fields slog's JSON handler writes.
func TestCommandLogsJSON(t *testing.T) {
	var stderr logbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newCommand()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--series-minors", "4.16", "--series-patches", "2"})
	cmd.SetErr(&stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	var addr string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
				addr = rec.Addr
			}
		}
		return addr != ""
	}, 10*time.Second, 20*time.Millisecond, "no serving line in %q", stderr.String())
	resp, err := http.Post("http://"+addr+"/admin/publish", "application/json",
		strings.NewReader(`{"channel":"stable-4.16","arch":"amd64","version":"4.16.2"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	cancel()
	require.NoError(t, <-done)

	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var msgs []string
	for _, line := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "not JSON: %q", line)
		for _, key := range []string{"time", "level", "msg"} {
			require.Contains(t, rec, key, "line %q", line)
		}
		msgs = append(msgs, rec["msg"].(string))
	}
	require.Equal(t, []string{"serving", "published release", "shutting down"}, msgs)
}

// TestStateFileKeepsAdminChanges publishes and removes releases through the admin endpoints of one simulator and
// checks that a simulator built afresh on the same state file serves the same graph.
func TestStateFileKeepsAdminChanges(t *testing.T) {
	state := filepath.Join(t.TempDir(), "dev", "cincinnati.json")
	cfg := config{stateFile: state, series: cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 3, Arches: []string{"amd64"}}}
	first, err := newSimulator(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(first.Handler())
	defer srv.Close()
	for _, step := range []struct{ path, body string }{
		{"/admin/publish", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.3"}`},
		{"/admin/publish", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.4","payload":"example.com/release:4.16.4"}`},
		{"/admin/remove", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.0"}`},
	} {
		resp, err := http.Post(srv.URL+step.path, "application/json", strings.NewReader(step.body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode, step.path+" "+step.body)
	}
	want, ok := first.Graph("stable-4.16", "amd64")
	require.True(t, ok)

	second, err := newSimulator(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	got, ok := second.Graph("stable-4.16", "amd64")
	require.True(t, ok)
	require.Equal(t, want, got)
	var versions []string
	for _, n := range got.Nodes {
		versions = append(versions, n.Version)
	}
	require.Equal(t, []string{"4.16.1", "4.16.2", "4.16.3", "4.16.4"}, versions)

	require.NoError(t, os.WriteFile(state, []byte("{not json"), 0o600))
	_, err = newSimulator(cfg, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, cincinnatisim.ErrInvalidJournal)
}
