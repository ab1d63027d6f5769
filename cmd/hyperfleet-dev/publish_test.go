package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

// TestPublish publishes into a real simulator over HTTP, as `make run`'s would be: the next patch of a minor goes
// to every channel that serves the minor (its own and the next minor's), an explicit version where asked.
func TestPublish(t *testing.T) {
	sim := cincinnatisim.New(cincinnatisim.WithAdmin())
	require.NoError(t, sim.AddSeries(cincinnatisim.Series{
		Minors: []string{"4.16", "4.17"}, ChannelGroups: []string{"stable", "fast", "candidate", "eus"},
		Arches: []string{"amd64", "arm64"}, Patches: 3, Prereleases: true,
	}))
	srv := sim.Start()
	t.Cleanup(srv.Close)
	cfg := publishConfig{cincinnatiURL: srv.URL, groups: []string{"stable", "fast", "candidate", "eus"}, arches: []string{"amd64"}}

	tests := []struct {
		name     string
		cfg      func(publishConfig) publishConfig
		what     string
		want     string
		channels []string // where the release must now be, on amd64
		wantErr  string
	}{
		{"next patch", nil, "4.16", "4.16.3",
			[]string{"stable-4.16", "fast-4.16", "candidate-4.16", "eus-4.16", "stable-4.17", "fast-4.17", "candidate-4.17"}, ""},
		{"the one after", nil, "4.16", "4.16.4", []string{"stable-4.16", "stable-4.17"}, ""},
		{"a version, one group", func(c publishConfig) publishConfig { c.groups = []string{"fast"}; return c }, "4.17.9", "4.17.9",
			[]string{"fast-4.17"}, ""},
		{"no such minor", nil, "4.99", "", nil, "serves no 4.99."},
		{"not a version", nil, "4.16.x", "", nil, "want a minor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.cfg != nil {
				c = tt.cfg(c)
			}
			var out, info bytes.Buffer
			err := runPublish(t.Context(), c, tt.what, &out, &info)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want+"\n", out.String())
			require.Contains(t, info.String(), "published "+tt.want)
			for _, ch := range tt.channels {
				g, ok := sim.Graph(ch, "amd64")
				require.True(t, ok, ch)
				require.True(t, hasVersion(g, tt.want), "%s lacks %s", ch, tt.want)
			}
			arm, _ := sim.Graph("stable-4.16", "arm64")
			require.False(t, hasVersion(arm, tt.want), "published on arm64 too")
		})
	}
	fast416, _ := sim.Graph("fast-4.16", "amd64")
	require.False(t, hasVersion(fast416, "4.17.9"), "a 4.17 release leaks into a 4.16 channel")
}

func hasVersion(g cincinnatisim.Graph, v string) bool {
	for _, n := range g.Nodes {
		if strings.EqualFold(n.Version, v) {
			return true
		}
	}
	return false
}
