package versionresolver

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// realGraph reads a fixture built from openshift/cincinnati-graph-data (testdata/graphs/README.md): the releases
// and the risks, with their names, URLs and messages, are the real service's.
func realGraph(t *testing.T, name string) *cincinnati.Graph {
	t.Helper()
	b, err := os.ReadFile("testdata/graphs/" + name)
	require.NoError(t, err)
	var g cincinnati.Graph
	require.NoError(t, json.Unmarshal(b, &g))
	return &g
}

func sliceOf(t *testing.T, g *cincinnati.Graph, target string, fleet ...string) *rollout.Graph {
	t.Helper()
	rel, ok := cincinnati.Find(g, target)
	require.True(t, ok, "%s is in the fixture", target)
	in := map[string]bool{}
	for _, v := range fleet {
		in[v] = true
	}
	return graphSlice(g, rel, false, in)
}

// TestNextHopOnRealGraphs walks stable-4.16 and stable-4.15 as the clusters of a stream targeting the newest release
// would: every 4.15 → 4.16 edge of stable-4.16 is conditional, 4.16.3 has no edge forward at all.
func TestNextHopOnRealGraphs(t *testing.T) {
	g416 := sliceOf(t, realGraph(t, "stable-4.16_amd64.json"), "4.16.6")
	g415 := sliceOf(t, realGraph(t, "stable-4.15_amd64.json"), "4.15.12")
	// The real graphs have no dead end; an edge removed at run time (cincinnati-sim /admin/remove-edge) makes one.
	deadEnd := graphSlice(&cincinnati.Graph{Nodes: []cincinnati.Node{{Version: "4.16.1"}, {Version: "4.16.2", Payload: "img-2"}}},
		cincinnati.Release{Version: "4.16.2", Image: "img-2"}, false, nil)
	tests := []struct {
		name      string
		graph     *rollout.Graph
		current   string
		accepted  []string
		wantTo    string
		wantBlock string
		wantRisks []string
	}{
		{name: "an unconditional edge to the target", graph: g416, current: "4.16.4", wantTo: "4.16.6"},
		{name: "at the target", graph: g416, current: "4.16.6"},
		{name: "4.16.3 leaves only through a risk", graph: g416, current: "4.16.3",
			wantBlock: rollout.BlockedRiskNotAccepted, wantRisks: []string{"HyperShiftNodePoolSkewBinaryDownload"}},
		{name: "no edge forward", graph: deadEnd, current: "4.16.1", wantBlock: rollout.BlockedNoUpdatePath},
		{name: "only conditional edges to 4.16: the newest's risk waits", graph: g416, current: "4.15.14",
			wantBlock: rollout.BlockedRiskNotAccepted, wantRisks: []string{"HyperShiftNodePoolSkewBinaryDownload"}},
		{name: "the risk accepted: the newest release", graph: g416, current: "4.15.14",
			accepted: []string{"HyperShiftNodePoolSkewBinaryDownload"}, wantTo: "4.16.6"},
		{name: "an unconditional patch beside a conditional minor", graph: g416, current: "4.15.17", wantTo: "4.15.20",
			wantRisks: []string{"HyperShiftNodePoolSkewBinaryDownload"}},
		{name: "a release outside the graph (pulled)", graph: g416, current: "4.15.13", wantBlock: rollout.BlockedNotInGraph},
		{name: "never past the target", graph: g415, current: "4.15.11", wantTo: "4.15.12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accepted := map[string]bool{}
			for _, r := range tt.accepted {
				accepted[r] = true
			}
			hop := tt.graph.NextHop(tt.current, accepted)
			require.Equal(t, tt.wantTo, hop.To)
			require.Equal(t, tt.wantBlock, hop.Blocked)
			require.Equal(t, tt.wantRisks, hop.Risks)
			if hop.To != "" {
				require.NotEmpty(t, hop.Image, "a hop names its image")
			}
		})
	}
	why := g416.Explain("4.15.14", g416.NextHop("4.15.14", nil))
	require.Contains(t, why, "HyperShiftNodePoolSkewBinaryDownload (https://", "the risk's URL is named")
}

// TestGraphSliceIsBounded: a graph of many releases is cut to rollout.MaxPaths versions, the fleet's first, and the
// slice of a real graph fits in a report many times over.
func TestGraphSliceIsBounded(t *testing.T) {
	g := &cincinnati.Graph{}
	for i := range 400 {
		g.Nodes = append(g.Nodes, cincinnati.Node{Version: "4.16." + itoa(i), Payload: "quay.io/x@sha256:" + strings.Repeat("a", 64)})
		if i > 0 {
			g.Edges = append(g.Edges, [2]int{i - 1, i})
		}
	}
	s := graphSlice(g, cincinnati.Release{Version: "4.16.399", Image: "img"}, false, map[string]bool{"4.16.3": true})
	require.True(t, s.Truncated)
	require.Len(t, s.Paths, rollout.MaxPaths)
	require.Contains(t, s.Paths, "4.16.3", "a version the fleet runs is kept")
	require.Equal(t, rollout.BlockedPathUnknown, s.NextHop("4.16.4", nil).Blocked)

	fromFixture := sliceOf(t, realGraph(t, "stable-4.16_amd64.json"), "4.16.6")
	b, err := json.Marshal(fromFixture)
	require.NoError(t, err)
	require.Less(t, len(b), 16<<10, "the real slice is small")
	require.False(t, fromFixture.Truncated)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
