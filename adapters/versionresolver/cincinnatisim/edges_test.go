package cincinnatisim_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

const riskBody = `{"name":"HyperShiftKubeAPIPort443","url":"https://issues.redhat.com/browse/HOSTEDCP-1849",
	"message":"Hosted clusters with API port 443 can break.","matchingRules":[{"type":"PromQL","promql":{"promql":"group(cluster_installer{_id=\"\"})"}}]}`

// Over the admin endpoints, journalled: an edge turns conditional (its plain edge goes, edges with the same risks
// share one entry), an edge is removed, a pulled release takes its conditional edges with it; the Cincinnati client
// parses what is served, and a simulator replaying the journal serves the same graph.
func TestConditionalAndRemovedEdgesWhileRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.json")
	journal, err := cincinnatisim.OpenJournal(path)
	require.NoError(t, err)
	_, base := startSeries(t, cincinnatisim.WithAdmin(), cincinnatisim.WithJournal(journal))
	post := func(op, body string) int {
		t.Helper()
		resp, err := http.Post(base+"/admin/"+op, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	edge := func(from, to, risks string) string {
		return `{"channel":"stable-4.16","arch":"amd64","from":"` + from + `","to":"` + to + `","risks":[` + risks + `]}`
	}
	require.True(t, hasEdge(getGraph(t, base, "stable-4.16", "amd64"), "4.16.2", "4.16.3"))

	tests := []struct {
		op, body string
		want     int
	}{
		{"conditional-edge", edge("4.16.2", "4.16.3", riskBody), http.StatusNoContent},
		{"conditional-edge", edge("4.16.1", "4.16.3", riskBody), http.StatusNoContent}, // joins the same entry
		{"conditional-edge", edge("4.16.2", "4.16.9", riskBody), http.StatusNoContent}, // 4.16.9 is pulled below
		{"conditional-edge", edge("4.16.2", "4.16.99", riskBody), http.StatusBadRequest},
		{"conditional-edge", edge("4.16.2", "4.16.4", ""), http.StatusBadRequest},
		{"conditional-edge", edge("4.16.2", "4.16.4", `{"name":"NoRules","url":"u","message":"m"}`), http.StatusBadRequest},
		{"remove-edge", edge("4.16.2", "4.16.5", ""), http.StatusNoContent},
		{"remove-edge", edge("4.16.2", "4.16.5", ""), http.StatusNotFound},
		{"remove", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.9"}`, http.StatusNoContent},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, post(tt.op, tt.body), "%s %s", tt.op, tt.body)
	}

	client := cincinnati.NewClient(base, http.DefaultClient)
	g, err := client.Graph(context.Background(), "stable-4.16", "amd64")
	require.NoError(t, err)
	require.Len(t, g.ConditionalEdges, 1)
	require.Equal(t, []cincinnati.Edge{{From: "4.16.2", To: "4.16.3"}, {From: "4.16.1", To: "4.16.3"}}, g.ConditionalEdges[0].Edges,
		"the pulled release's conditional edge went with it")
	require.Equal(t, []cincinnati.Risk{{Name: "HyperShiftKubeAPIPort443", URL: "https://issues.redhat.com/browse/HOSTEDCP-1849",
		Message:       "Hosted clusters with API port 443 can break.",
		MatchingRules: []cincinnati.MatchingRule{{Type: cincinnati.RulePromQL, PromQL: &cincinnati.PromQL{PromQL: `group(cluster_installer{_id=""})`}}}}},
		g.ConditionalEdges[0].Risks)
	served := getGraph(t, base, "stable-4.16", "amd64")
	require.False(t, hasEdge(served, "4.16.2", "4.16.3"), "a conditional edge is not also a plain one")
	require.False(t, hasEdge(served, "4.16.2", "4.16.5"), "the removed edge")
	require.True(t, hasEdge(served, "4.16.2", "4.16.4"), "other edges stay")
	require.NotContains(t, versions(served), "4.16.9")

	reopened, err := cincinnatisim.OpenJournal(path)
	require.NoError(t, err)
	require.Len(t, reopened.Entries(), 5, "every accepted change, and only those")
	restarted := cincinnatisim.New()
	require.NoError(t, restarted.AddSeries(cincinnatisim.Series{Minors: []string{"4.15", "4.16", "4.17"}, Patches: 12,
		Arches: []string{"amd64", "arm64", "multi"}, Prereleases: true}))
	require.NoError(t, reopened.Replay(restarted))
	replayed, ok := restarted.Graph("stable-4.16", "amd64")
	require.True(t, ok)
	require.Equal(t, served, replayed, "a restart on the journal serves the same graph")
}

// The real-data fixtures (../testdata/graphs) load as they are, so cincinnati-sim --fixtures can serve them.
func TestRealGraphFixturesLoad(t *testing.T) {
	sim := cincinnatisim.New()
	require.NoError(t, sim.LoadFixtures(filepath.Join("..", "testdata", "graphs")))
	require.Equal(t, []string{"stable-4.15", "stable-4.16"}, sim.Channels())
	g, ok := sim.Graph("stable-4.16", "amd64")
	require.True(t, ok)
	require.NotEmpty(t, g.ConditionalEdges)
	require.True(t, sim.RemoveEdge("stable-4.16", "amd64", "4.15.14", "4.16.0"), "a conditional edge of the real data")
}
