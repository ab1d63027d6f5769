package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
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
			sim, err := build(tt.cfg, slog.New(slog.DiscardHandler))
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
	sim, err := build(config{series: cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 2}}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, sim.Handler(), slog.New(slog.DiscardHandler)) }()

	resp, err := http.Get("http://" + ln.Addr().String() + cincinnatisim.GraphPath + "?channel=stable-4.16&arch=amd64")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
}
