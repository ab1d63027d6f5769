package cincinnati

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func graphOf(versions ...string) *Graph {
	g := &Graph{Version: 1}
	for _, v := range versions {
		g.Nodes = append(g.Nodes, Node{Version: v, Payload: "quay.io/openshift-release-dev/ocp-release@sha256:" + v})
	}
	return g
}

func image(v string) string { return "quay.io/openshift-release-dev/ocp-release@sha256:" + v }

func TestLatest(t *testing.T) {
	tests := []struct {
		name       string
		graph      *Graph
		target     string
		prerelease bool
		want       string // version; image is derived
		wantErr    error
	}{
		{name: "previous minor present", graph: graphOf("4.15.30", "4.16.2", "4.15.31", "4.16.3", "4.16.1"), target: "4.16", want: "4.16.3"},
		{name: "next minor ignored", graph: graphOf("4.16.3", "4.17.0", "4.17.1"), target: "4.16", want: "4.16.3"},
		{name: "major differs", graph: graphOf("5.16.9", "4.16.3"), target: "4.16", want: "4.16.3"},
		{name: "double-digit patch", graph: graphOf("4.16.9", "4.16.10", "4.16.2"), target: "4.16", want: "4.16.10"},
		{name: "double-digit minor", graph: graphOf("4.1.99", "4.10.1", "4.10.0"), target: "4.1", want: "4.1.99"},
		{name: "GA beats rc of same version", graph: graphOf("4.16.0-rc.3", "4.16.0", "4.16.0-ec.2"), target: "4.16", prerelease: true, want: "4.16.0"},
		{name: "GA beats rc listed after it", graph: graphOf("4.16.0", "4.16.0-rc.3"), target: "4.16", prerelease: true, want: "4.16.0"},
		{name: "rc newer than previous GA when allowed", graph: graphOf("4.16.0", "4.16.1-rc.0"), target: "4.16", prerelease: true, want: "4.16.1-rc.0"},
		{name: "rc ignored when not allowed", graph: graphOf("4.16.0", "4.16.1-rc.0"), target: "4.16", want: "4.16.0"},
		{name: "rc beats ec", graph: graphOf("4.17.0-ec.3", "4.17.0-rc.1", "4.17.0-ec.4"), target: "4.17", prerelease: true, want: "4.17.0-rc.1"},
		{name: "numeric pre-release order", graph: graphOf("4.17.0-rc.9", "4.17.0-rc.10"), target: "4.17", prerelease: true, want: "4.17.0-rc.10"},
		{name: "only pre-releases, not allowed", graph: graphOf("4.17.0-ec.1", "4.17.0-rc.0"), target: "4.17", wantErr: ErrVersionNotFound},
		{name: "invalid versions skipped", graph: graphOf("garbage", "4.16", "v4.16.9", "4.16.3", ""), target: "4.16", want: "4.16.3"},
		{name: "multi arch payloads", graph: graphOf("4.16.3-multi", "4.16.3"), target: "4.16", want: "4.16.3"},
		{name: "empty graph", graph: graphOf(), target: "4.16", wantErr: ErrVersionNotFound},
		{name: "nil graph", graph: nil, target: "4.16", wantErr: ErrVersionNotFound},
		{name: "target minor absent", graph: graphOf("4.15.1", "4.17.1"), target: "4.16", wantErr: ErrVersionNotFound},
		{name: "target with patch", graph: graphOf("4.16.3"), target: "4.16.3", wantErr: ErrInvalidTarget},
		{name: "target with v prefix", graph: graphOf("4.16.3"), target: "v4.16", wantErr: ErrInvalidTarget},
		{name: "empty target", graph: graphOf("4.16.3"), target: "", wantErr: ErrInvalidTarget},
		{name: "target out of range", graph: graphOf("4.16.3"), target: "4.99999999999999999999", wantErr: ErrInvalidTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Latest(tt.graph, tt.target, tt.prerelease)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, Release{}, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Release{Version: tt.want, Image: image(tt.want)}, got)
		})
	}
}

func TestLatestMultiArchGraph(t *testing.T) {
	// The multi channel carries the same versions with manifest-list payloads.
	g := &Graph{Nodes: []Node{
		{Version: "4.16.2", Payload: "quay.io/openshift-release-dev/ocp-release@sha256:aa", Metadata: map[string]string{"release.openshift.io/architecture": "multi"}},
		{Version: "4.16.10", Payload: "quay.io/openshift-release-dev/ocp-release@sha256:bb", Metadata: map[string]string{"release.openshift.io/architecture": "multi"}},
	}}
	got, err := Latest(g, "4.16", false)
	require.NoError(t, err)
	require.Equal(t, Release{Version: "4.16.10", Image: "quay.io/openshift-release-dev/ocp-release@sha256:bb"}, got)
}

func TestNewer(t *testing.T) {
	tests := []struct {
		candidate, current string
		want               bool
	}{
		{"4.16.3", "", true},
		{"4.16.3", "4.16.2", true},
		{"4.16.10", "4.16.9", true},
		{"4.16.9", "4.16.10", false},
		{"4.16.3", "4.16.3", false},
		{"4.16.2", "4.16.3", false},
		{"4.16.0", "4.16.0-rc.3", true},
		{"4.16.0-rc.3", "4.16.0", false},
		{"4.16.0-rc.1", "4.16.0-ec.4", true},
		{"4.16.0-rc.10", "4.16.0-rc.9", true},
		{"4.17.0", "4.16.30", true},
		{"garbage", "", false},
		{"garbage", "4.16.1", false},
		{"4.16.1", "garbage", true},
	}
	for _, tt := range tests {
		t.Run(tt.candidate+"_vs_"+tt.current, func(t *testing.T) {
			require.Equal(t, tt.want, Newer(tt.candidate, tt.current))
		})
	}
}

// TestNeverBackwards is the reconciler's decision: pick Latest, switch only if Newer.
func TestNeverBackwards(t *testing.T) {
	tests := []struct {
		name       string
		graph      *Graph
		current    string
		wantSwitch bool
		wantGone   bool
	}{
		{name: "first resolution", graph: graphOf("4.16.2", "4.16.3"), current: "", wantSwitch: true},
		{name: "new patch published", graph: graphOf("4.16.2", "4.16.3", "4.16.4"), current: "4.16.3", wantSwitch: true},
		{name: "unchanged", graph: graphOf("4.16.2", "4.16.3"), current: "4.16.3"},
		{name: "current pulled from graph", graph: graphOf("4.16.2"), current: "4.16.3", wantGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			latest, err := Latest(tt.graph, "4.16", false)
			require.NoError(t, err)
			require.Equal(t, tt.wantSwitch, Newer(latest.Version, tt.current))
			if tt.current != "" {
				_, found := Find(tt.graph, tt.current)
				require.Equal(t, tt.wantGone, !found)
			}
		})
	}
}

func TestFind(t *testing.T) {
	g := graphOf("4.16.2", "4.16.3+build.1", "bogus")
	got, ok := Find(g, "4.16.2")
	require.True(t, ok)
	require.Equal(t, Release{Version: "4.16.2", Image: image("4.16.2")}, got)

	got, ok = Find(g, "4.16.3")
	require.True(t, ok)
	require.Equal(t, "4.16.3+build.1", got.Version)

	for _, v := range []string{"4.16.4", "bogus", "", "4.16.2-rc.1"} {
		_, ok = Find(g, v)
		require.False(t, ok, v)
	}
	_, ok = Find(nil, "4.16.2")
	require.False(t, ok)
}

func TestChannel(t *testing.T) {
	require.Equal(t, "stable-4.16", Channel("stable", "4.16"))
	require.Equal(t, "candidate-4.17", Channel("candidate", "4.17"))
	require.True(t, AllowsPrerelease("candidate"))
	for _, g := range []string{"stable", "fast", "eus", ""} {
		require.False(t, AllowsPrerelease(g), g)
	}
}

func TestArch(t *testing.T) {
	for _, a := range []string{"amd64", "arm64", "ppc64le", "s390x", "multi"} {
		got, err := Arch(a)
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	for _, a := range []string{"", "x86_64", "aarch64", "AMD64", "riscv64"} {
		_, err := Arch(a)
		require.ErrorIs(t, err, ErrInvalidArch, a)
	}
}

func TestCheckTarget(t *testing.T) {
	for _, tt := range []struct {
		target string
		ok     bool
	}{{"4.16", true}, {"10.0", true}, {"4", false}, {"4.16.1", false}, {"v4.16", false}, {"", false}} {
		err := CheckTarget(tt.target)
		if tt.ok {
			require.NoError(t, err, tt.target)
		} else {
			require.ErrorIs(t, err, ErrInvalidTarget, tt.target)
		}
	}
}
