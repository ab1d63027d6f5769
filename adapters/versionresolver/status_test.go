package versionresolver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

var (
	stable416    = Stream{Target: "4.16", Channel: "stable-4.16", Arch: "amd64"}
	stable417    = Stream{Target: "4.17", Channel: "stable-4.17", Arch: "amd64"}
	candidate417 = Stream{Target: "4.17", Channel: "candidate-4.17", Arch: "amd64", AllowPrerelease: true}
	multi416     = Stream{Target: "4.16", Channel: "stable-4.16", Arch: "multi"}

	// now is deliberately not the zero time nor the time of any last resolution, so that a test can tell which
	// one resolved_time came from.
	now     = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	earlier = time.Date(2024, 5, 20, 8, 30, 0, 0, time.UTC)
)

// graphOf returns a graph of versions on arch, with the payloads cincinnatisim would serve.
func graphOf(arch string, versions ...string) *cincinnati.Graph {
	g := &cincinnati.Graph{Version: 1, Nodes: []cincinnati.Node{}}
	for _, v := range versions {
		g.Nodes = append(g.Nodes, cincinnati.Node{Version: v, Payload: cincinnatisim.PayloadFor(v, arch)})
	}
	return g
}

// resolution returns what s resolving to version at t looks like.
func resolution(s Stream, version string, t time.Time) *Resolution {
	return &Resolution{Image: cincinnatisim.PayloadFor(version, s.Arch), Version: version, Channel: s.Channel,
		Arch: s.Arch, Time: t}
}

// dataOf spells the keys out rather than using the Data* constants: they are the contract the HostedCluster
// applier reads, and renaming a constant must not silently change it.
func dataOf(s Stream, version string, t time.Time) map[string]any {
	return map[string]any{
		"release_image":    cincinnatisim.PayloadFor(version, s.Arch),
		"resolved_version": version,
		"channel":          s.Channel,
		"arch":             s.Arch,
		"resolved_time":    t.Format(time.RFC3339),
	}
}

type cond struct {
	Status conditions.Status
	Reason string
}

// conditionsOf returns out's Available and own conditions by type, failing if a type appears twice or a False
// condition says nothing: its message is all an operator gets to see.
func conditionsOf(tb testing.TB, out adapter.Outcome) map[string]cond {
	tb.Helper()
	got := map[string]cond{conditions.Available: {out.Available.Status, out.Available.Reason}}
	if out.Available.Status == conditions.False {
		require.NotEmpty(tb, out.Available.Message, "Available is False without a message")
	}
	for _, c := range out.Conditions {
		_, dup := got[c.Type]
		require.False(tb, dup, "condition %s reported twice", c.Type)
		if c.Status == conditions.False {
			require.NotEmpty(tb, c.Message, "condition %s is False without a message", c.Type)
		}
		got[c.Type] = cond{c.Status, c.Reason}
	}
	return got
}

// requireClass checks err's class: want is adapter.ErrTransient, adapter.ErrTerminal or nil.
func requireClass(tb testing.TB, err, want error) {
	tb.Helper()
	switch {
	case want == nil:
		require.NoError(tb, err)
	case errors.Is(want, adapter.ErrTransient):
		require.ErrorIs(tb, err, adapter.ErrTransient)
		require.NotErrorIs(tb, err, adapter.ErrTerminal)
	case errors.Is(want, adapter.ErrTerminal):
		require.ErrorIs(tb, err, adapter.ErrTerminal)
		require.NotErrorIs(tb, err, adapter.ErrTransient)
	default:
		tb.Fatalf("requireClass: %v is not an error class", want)
	}
}

func TestResolve(t *testing.T) {
	rejected := fmt.Errorf("%w: graph stable-4.16/amd64: HTTP 400: invalid_params: unknown channel", cincinnati.ErrRejected)
	unavailable := fmt.Errorf("%w: GET https://api.openshift.com/api/upgrades_info/v1/graph: connection refused", cincinnati.ErrUnavailable)
	badResponse := fmt.Errorf("%w: decode graph stable-4.16/amd64: unexpected EOF", cincinnati.ErrBadResponse)

	resolved := cond{conditions.True, ReasonResolved}
	inGraph := cond{conditions.True, ReasonInGraph}
	removed := cond{conditions.False, ReasonRemovedFromGraph}
	imageKnown := cond{conditions.True, ReasonImageKnown}
	notFound := cond{conditions.False, ReasonVersionNotFound}
	failed := cond{conditions.False, ReasonResolutionFailed}
	unreachable := cond{conditions.False, ReasonCincinnatiUnavailable}

	tests := []struct {
		name     string
		stream   Stream
		last     *Resolution
		graph    *cincinnati.Graph
		graphErr error
		want     map[string]cond // Available and the resolver's conditions, by type
		wantData map[string]any
		wantErr  error // adapter.ErrTransient, adapter.ErrTerminal or nil
	}{
		{
			// Real channels carry the previous minor's patches too, some with higher patch numbers.
			name:     "previous minor ignored",
			stream:   stable416,
			graph:    graphOf("amd64", "4.15.30", "4.16.2", "4.15.31", "4.16.3", "4.16.1"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(stable416, "4.16.3", now),
		},
		{
			name:     "double-digit patch",
			stream:   stable416,
			graph:    graphOf("amd64", "4.16.9", "4.16.10", "4.16.2"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(stable416, "4.16.10", now),
		},
		{
			name:     "GA beats rc and ec of the same version in candidate",
			stream:   candidate417,
			graph:    graphOf("amd64", "4.17.0-rc.1", "4.17.0", "4.17.0-ec.2"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(candidate417, "4.17.0", now),
		},
		{
			name:     "candidate with only pre-releases: rc beats ec",
			stream:   candidate417,
			graph:    graphOf("amd64", "4.17.0-ec.2", "4.17.0-rc.1"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(candidate417, "4.17.0-rc.1", now),
		},
		{
			name:     "pre-release newer than GA ignored outside candidate",
			stream:   stable417,
			graph:    graphOf("amd64", "4.17.0", "4.17.1-rc.0"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(stable417, "4.17.0", now),
		},
		{
			name:    "only pre-releases outside candidate",
			stream:  stable417,
			graph:   graphOf("amd64", "4.16.9", "4.17.0-ec.2", "4.17.0-rc.1"),
			want:    map[string]cond{"Available": notFound, "ImageResolved": notFound},
			wantErr: adapter.ErrTransient,
		},
		{
			name:     "candidate moves from rc to GA",
			stream:   candidate417,
			last:     resolution(candidate417, "4.17.0-rc.1", earlier),
			graph:    graphOf("amd64", "4.17.0-rc.1", "4.17.0"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(candidate417, "4.17.0", now),
		},
		{
			name:     "multi arch",
			stream:   multi416,
			graph:    graphOf("multi", "4.16.3", "4.16.4"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(multi416, "4.16.4", now),
		},
		{
			name:    "empty graph",
			stream:  stable416,
			graph:   graphOf("amd64"),
			want:    map[string]cond{"Available": notFound, "ImageResolved": notFound},
			wantErr: adapter.ErrTransient,
		},
		{
			name:     "empty graph keeps the last image",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graph:    graphOf("amd64"),
			want:     map[string]cond{"Available": imageKnown, "ImageResolved": notFound, "ResolvedVersionInGraph": removed},
			wantData: dataOf(stable416, "4.16.5", earlier),
			wantErr:  adapter.ErrTransient,
		},
		{
			// A channel appears only once its minor ships: retrying is what picks it up.
			name:     "missing channel",
			stream:   stable416,
			graphErr: rejected,
			want:     map[string]cond{"Available": failed, "ImageResolved": failed},
			wantErr:  adapter.ErrTransient,
		},
		{
			name:     "missing channel keeps the last image",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graphErr: rejected,
			want:     map[string]cond{"Available": imageKnown, "ImageResolved": failed},
			wantData: dataOf(stable416, "4.16.5", earlier),
			wantErr:  adapter.ErrTransient,
		},
		{
			name:     "Cincinnati unavailable",
			stream:   stable416,
			graphErr: unavailable,
			want:     map[string]cond{"Available": unreachable, "ImageResolved": unreachable},
			wantErr:  adapter.ErrTransient,
		},
		{
			name:     "Cincinnati unavailable keeps the last image",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graphErr: unavailable,
			want:     map[string]cond{"Available": imageKnown, "ImageResolved": unreachable},
			wantData: dataOf(stable416, "4.16.5", earlier),
			wantErr:  adapter.ErrTransient,
		},
		{
			name:     "bad response",
			stream:   stable416,
			graphErr: badResponse,
			want:     map[string]cond{"Available": unreachable, "ImageResolved": unreachable},
			wantErr:  adapter.ErrTransient,
		},
		{
			name:     "bad response keeps the last image",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graphErr: badResponse,
			want:     map[string]cond{"Available": imageKnown, "ImageResolved": unreachable},
			wantData: dataOf(stable416, "4.16.5", earlier),
			wantErr:  adapter.ErrTransient,
		},
		{
			name:     "never backwards when the resolved version is pulled",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graph:    graphOf("amd64", "4.16.3", "4.16.4"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": removed},
			wantData: dataOf(stable416, "4.16.5", earlier),
		},
		{
			name:     "same version found again keeps its resolved_time",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graph:    graphOf("amd64", "4.16.4", "4.16.5"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(stable416, "4.16.5", earlier),
		},
		{
			name:     "newer patch resolved now",
			stream:   stable416,
			last:     resolution(stable416, "4.16.5", earlier),
			graph:    graphOf("amd64", "4.16.5", "4.16.6"),
			want:     map[string]cond{"Available": resolved, "ImageResolved": resolved, "ResolvedVersionInGraph": inGraph},
			wantData: dataOf(stable416, "4.16.6", now),
		},
		{
			// streamOf rejects such targets first; resolve must still not retry what cannot succeed.
			name:    "invalid target",
			stream:  Stream{Target: "4", Channel: "stable-4", Arch: "amd64"},
			graph:   graphOf("amd64", "4.16.3"),
			want:    map[string]cond{"Available": {conditions.False, ReasonInvalidSpec}, "ImageResolved": {conditions.False, ReasonInvalidSpec}},
			wantErr: adapter.ErrTerminal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := resolve(tt.stream, tt.last, tt.graph, tt.graphErr, now)
			requireClass(t, err, tt.wantErr)
			if tt.graphErr != nil {
				require.ErrorIs(t, err, tt.graphErr)
			}
			require.Equal(t, tt.want, conditionsOf(t, out))
			require.Equal(t, tt.wantData, out.Data)
		})
	}
}

func TestLastResolution(t *testing.T) {
	matching := map[string]any{
		"release_image":    cincinnatisim.PayloadFor("4.16.5", "amd64"),
		"resolved_version": "4.16.5",
		"channel":          "stable-4.16",
		"arch":             "amd64",
		"resolved_time":    "2024-05-20T08:30:00Z",
	}
	without := func(key string) map[string]any {
		m := map[string]any{}
		for k, v := range matching {
			if k != key {
				m[k] = v
			}
		}
		return m
	}
	with := func(key string, value any) map[string]any {
		m := without(key)
		m[key] = value
		return m
	}

	tests := []struct {
		name   string
		report *adapter.Report
		want   *Resolution
	}{
		{name: "no report", report: nil},
		{name: "report without data", report: &adapter.Report{}},
		{name: "no release image", report: &adapter.Report{Data: without("release_image")}},
		{name: "release image not a string", report: &adapter.Report{Data: with("release_image", 42)}},
		{name: "no resolved version", report: &adapter.Report{Data: without("resolved_version")}},
		// A retargeted stream must not treat the old minor's version as a floor.
		{name: "another channel", report: &adapter.Report{Data: with("channel", "stable-4.15")}},
		{name: "another channel group", report: &adapter.Report{Data: with("channel", "fast-4.16")}},
		{name: "another arch", report: &adapter.Report{Data: with("arch", "arm64")}},
		{
			name:   "matching",
			report: &adapter.Report{Data: matching},
			want:   resolution(stable416, "4.16.5", earlier),
		},
		{
			name:   "matching, time with an offset",
			report: &adapter.Report{Data: with("resolved_time", "2024-05-20T10:30:00+02:00")},
			want:   resolution(stable416, "4.16.5", earlier),
		},
		{
			name:   "what resolve reported",
			report: &adapter.Report{Data: resolution(stable416, "4.16.5", earlier).data()},
			want:   resolution(stable416, "4.16.5", earlier),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lastResolution(tt.report, stable416)
			if tt.want == nil {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			require.True(t, tt.want.Time.Equal(got.Time), "time: got %v, want %v", got.Time, tt.want.Time)
			got.Time, tt.want.Time = time.Time{}, time.Time{}
			require.Equal(t, tt.want, got)
		})
	}
}
