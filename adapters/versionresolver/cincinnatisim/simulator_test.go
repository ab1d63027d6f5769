package cincinnatisim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

// startSeries starts a simulator serving 4.15–4.17 with 12 patches on amd64, arm64 and multi, with pre-releases.
func startSeries(tb testing.TB, opts ...cincinnatisim.Option) (*cincinnatisim.Simulator, string) {
	tb.Helper()
	sim := cincinnatisim.New(opts...)
	require.NoError(tb, sim.AddSeries(cincinnatisim.Series{
		Minors:      []string{"4.15", "4.16", "4.17"},
		Patches:     12,
		Arches:      []string{"amd64", "arm64", "multi"},
		Prereleases: true,
	}))
	srv := sim.Start()
	tb.Cleanup(srv.Close)
	return sim, srv.URL
}

type response struct {
	status      int
	contentType string
	body        []byte
}

func get(tb testing.TB, base, channel, arch string) response {
	tb.Helper()
	q := url.Values{}
	if channel != "" {
		q.Set("channel", channel)
	}
	if arch != "" {
		q.Set("arch", arch)
	}
	req, err := http.NewRequest(http.MethodGet, base+cincinnatisim.GraphPath+"?"+q.Encode(), http.NoBody)
	require.NoError(tb, err)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return response{resp.StatusCode, resp.Header.Get("Content-Type"), body}
}

func getGraph(tb testing.TB, base, channel, arch string) cincinnatisim.Graph {
	tb.Helper()
	r := get(tb, base, channel, arch)
	require.Equal(tb, http.StatusOK, r.status, string(r.body))
	require.Equal(tb, "application/json", r.contentType)
	var g cincinnatisim.Graph
	require.NoError(tb, json.Unmarshal(r.body, &g))
	return g
}

func versions(g cincinnatisim.Graph) []string {
	out := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		out[i] = n.Version
	}
	return out
}

func hasEdge(g cincinnatisim.Graph, from, to string) bool {
	f := slices.Index(versions(g), from)
	t := slices.Index(versions(g), to)
	return f >= 0 && t >= 0 && slices.Contains(g.Edges, [2]int{f, t})
}

func TestGraphPerChannelAndArch(t *testing.T) {
	_, base := startSeries(t)
	tests := []struct {
		channel, arch string
		contains      []string
		absent        []string
		edges         [][2]string
	}{
		{
			channel: "stable-4.16", arch: "amd64",
			contains: []string{"4.15.0", "4.15.11", "4.16.0", "4.16.9", "4.16.10", "4.16.11"},
			absent:   []string{"4.16.0-rc.1", "4.16.0-ec.2", "4.17.0", "4.14.0"},
			edges:    [][2]string{{"4.16.3", "4.16.11"}, {"4.16.9", "4.16.10"}, {"4.15.11", "4.16.0"}, {"4.15.11", "4.16.11"}},
		},
		{
			channel: "stable-4.15", arch: "arm64",
			contains: []string{"4.15.0", "4.15.11"},
			absent:   []string{"4.14.0", "4.16.0"},
		},
		{
			channel: "candidate-4.17", arch: "multi",
			contains: []string{"4.16.11", "4.17.0-ec.0", "4.17.0-ec.2", "4.17.0-rc.1", "4.17.0", "4.17.11"},
			absent:   []string{"4.16.0-rc.1"},
			edges:    [][2]string{{"4.17.0-rc.1", "4.17.0"}, {"4.17.0-ec.2", "4.17.0-rc.0"}, {"4.16.11", "4.17.0-rc.1"}},
		},
		{
			channel: "fast-4.17", arch: "amd64",
			contains: []string{"4.16.0", "4.17.11"},
			absent:   []string{"4.17.0-rc.1", "4.17.0-ec.0"},
		},
		{
			channel: "eus-4.16", arch: "amd64",
			contains: []string{"4.15.3", "4.16.3"},
			absent:   []string{"4.16.0-rc.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.channel+"/"+tt.arch, func(t *testing.T) {
			g := getGraph(t, base, tt.channel, tt.arch)
			require.Equal(t, 1, g.Version)
			require.NotNil(t, g.ConditionalEdges)
			got := versions(g)
			for _, v := range tt.contains {
				require.Contains(t, got, v)
			}
			for _, v := range tt.absent {
				require.NotContains(t, got, v)
			}
			for _, e := range tt.edges {
				require.True(t, hasEdge(g, e[0], e[1]), "edge %s → %s", e[0], e[1])
			}
			require.False(t, hasEdge(g, "4.16.5", "4.16.4"), "no downgrade edges")
			for _, n := range g.Nodes {
				require.Equal(t, cincinnatisim.PayloadFor(n.Version, tt.arch), n.Payload)
				require.True(t, strings.HasPrefix(n.Payload, "quay.io/openshift-release-dev/ocp-release@sha256:"))
				require.Contains(t, n.Metadata[cincinnatisim.MetadataChannels], tt.channel)
			}
		})
	}
}

func TestPayloadsDifferPerArch(t *testing.T) {
	_, base := startSeries(t)
	amd := getGraph(t, base, "stable-4.16", "amd64")
	arm := getGraph(t, base, "stable-4.16", "arm64")
	require.NotEqual(t, amd.Nodes[0].Payload, arm.Nodes[0].Payload)
	require.Equal(t, amd.Nodes[0].Version, arm.Nodes[0].Version)
}

func TestErrors(t *testing.T) {
	_, base := startSeries(t)
	tests := []struct {
		name, channel, arch string
		wantStatus          int
		wantKind            string
	}{
		{"unknown channel", "stable-9.99", "amd64", http.StatusBadRequest, cincinnatisim.KindInvalidParams},
		{"unknown arch", "stable-4.16", "riscv64", http.StatusBadRequest, cincinnatisim.KindInvalidParams},
		{"missing channel", "", "amd64", http.StatusBadRequest, cincinnatisim.KindMissingParams},
		{"missing arch", "stable-4.16", "", http.StatusBadRequest, cincinnatisim.KindMissingParams},
		{"eus of odd minor", "eus-4.15", "amd64", http.StatusBadRequest, cincinnatisim.KindInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(t, base, tt.channel, tt.arch)
			require.Equal(t, tt.wantStatus, r.status)
			require.Equal(t, "application/json", r.contentType)
			var e struct{ Kind, Value string }
			require.NoError(t, json.Unmarshal(r.body, &e))
			require.Equal(t, tt.wantKind, e.Kind)
			require.NotEmpty(t, e.Value)
		})
	}
}

func TestFixtures(t *testing.T) {
	dir := t.TempDir()
	fixture := `{"version":1,"nodes":[
		{"version":"4.16.2","payload":"quay.io/x@sha256:aa","metadata":{"url":"u"}},
		{"version":"4.16.10","payload":"quay.io/x@sha256:bb","metadata":{}}],
		"edges":[[0,1]],"conditionalEdges":[{"edges":[{"from":"4.16.2","to":"4.16.10"}],"risks":[]}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stable-4.16_amd64.json"), []byte(fixture), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "candidate-4.17_multi.json"), []byte(`{"version":1,"nodes":[],"edges":[]}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("ignored"), 0o600))

	sim := cincinnatisim.New()
	require.NoError(t, sim.LoadFixtures(dir))
	srv := sim.Start()
	t.Cleanup(srv.Close)
	require.Equal(t, srv.URL, sim.URL())

	g := getGraph(t, srv.URL, "stable-4.16", "amd64")
	require.Equal(t, []string{"4.16.2", "4.16.10"}, versions(g))
	require.Equal(t, "quay.io/x@sha256:bb", g.Nodes[1].Payload)
	require.Equal(t, [][2]int{{0, 1}}, g.Edges)
	require.Len(t, g.ConditionalEdges, 1)

	empty := getGraph(t, srv.URL, "candidate-4.17", "multi")
	require.Empty(t, empty.Nodes)
	require.Equal(t, []string{"candidate-4.17", "stable-4.16"}, sim.Channels())
}

func TestFixturesInvalid(t *testing.T) {
	tests := []struct{ name, file, body string }{
		{"bad json", "stable-4.16_amd64.json", `{"nodes":[`},
		{"edge out of range", "stable-4.16_amd64.json", `{"version":1,"nodes":[{"version":"4.16.1"}],"edges":[[0,3]]}`},
		{"bad name", "stable-4.16.json", `{"version":1,"nodes":[],"edges":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.body), 0o600))
			err := cincinnatisim.New().LoadFixtures(dir)
			require.ErrorIs(t, err, cincinnatisim.ErrInvalidFixture)
		})
	}
	require.ErrorIs(t, cincinnatisim.New().LoadFixtures(filepath.Join(t.TempDir(), "missing")), cincinnatisim.ErrInvalidFixture)
}

func TestSeriesInvalid(t *testing.T) {
	tests := []struct {
		name   string
		series cincinnatisim.Series
	}{
		{"no minors", cincinnatisim.Series{Patches: 1}},
		{"zero patches", cincinnatisim.Series{Minors: []string{"4.16"}}},
		{"bad minor", cincinnatisim.Series{Minors: []string{"4.x"}, Patches: 1}},
		{"bad group", cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 1, ChannelGroups: []string{"stable-4"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, cincinnatisim.New().AddSeries(tt.series), cincinnatisim.ErrInvalidSeries)
		})
	}
}

func TestPublishAndRemoveWhileRunning(t *testing.T) {
	sim, base := startSeries(t)
	before := getGraph(t, base, "stable-4.16", "amd64")
	require.NotContains(t, versions(before), "4.16.12")

	require.NoError(t, sim.Publish("stable-4.16", "amd64", "4.16.12", "quay.io/openshift-release-dev/ocp-release@sha256:new"))
	g := getGraph(t, base, "stable-4.16", "amd64")
	require.Contains(t, versions(g), "4.16.12")
	require.Equal(t, "quay.io/openshift-release-dev/ocp-release@sha256:new", g.Nodes[slices.Index(versions(g), "4.16.12")].Payload)
	require.True(t, hasEdge(g, "4.16.0", "4.16.12"))
	require.True(t, hasEdge(g, "4.16.11", "4.16.12"))
	require.False(t, hasEdge(g, "4.15.3", "4.16.12"))
	require.True(t, hasEdge(g, "4.15.11", "4.16.12"))
	require.NotContains(t, versions(getGraph(t, base, "stable-4.16", "arm64")), "4.16.12", "other arches unchanged")

	// Into a new channel, with a derived payload.
	require.NoError(t, sim.Publish("stable-4.18", "amd64", "4.18.0", ""))
	g = getGraph(t, base, "stable-4.18", "amd64")
	require.Equal(t, []string{"4.18.0"}, versions(g))
	require.Equal(t, cincinnatisim.PayloadFor("4.18.0", "amd64"), g.Nodes[0].Payload)

	require.True(t, sim.Remove("stable-4.16", "amd64", "4.16.5"))
	require.False(t, sim.Remove("stable-4.16", "amd64", "4.16.5"))
	g = getGraph(t, base, "stable-4.16", "amd64")
	require.NotContains(t, versions(g), "4.16.5")
	require.True(t, hasEdge(g, "4.16.4", "4.16.12"), "edges reindexed after removal")
	for _, e := range g.Edges {
		require.Less(t, e[0], len(g.Nodes))
		require.Less(t, e[1], len(g.Nodes))
	}

	require.ErrorIs(t, sim.Publish("stable-4.16", "amd64", "4.16", ""), cincinnatisim.ErrInvalidVersion)
	require.ErrorIs(t, sim.Publish("", "amd64", "4.16.1", ""), cincinnatisim.ErrInvalidRelease)
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name       string
		fault      cincinnatisim.Fault
		wantStatus int
		wantKind   string
		badJSON    bool
	}{
		{"server error", cincinnatisim.Fault{Kind: cincinnatisim.FaultServerError}, http.StatusServiceUnavailable, cincinnatisim.KindUpstreamFetch, false},
		{"bad request", cincinnatisim.Fault{Kind: cincinnatisim.FaultBadRequest}, http.StatusBadRequest, cincinnatisim.KindInvalidParams, false},
		{"invalid json", cincinnatisim.Fault{Kind: cincinnatisim.FaultInvalidJSON}, http.StatusOK, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, base := startSeries(t)
			require.NoError(t, sim.SetFault(tt.fault))
			for range 2 { // Count 0 persists until cleared.
				r := get(t, base, "stable-4.16", "amd64")
				require.Equal(t, tt.wantStatus, r.status)
				var e struct{ Kind, Value string }
				err := json.Unmarshal(r.body, &e)
				if tt.badJSON {
					require.Error(t, err)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, tt.wantKind, e.Kind)
				require.NotEmpty(t, e.Value)
			}
			sim.ClearFaults()
			getGraph(t, base, "stable-4.16", "amd64")
			require.Equal(t, 3, sim.Requests())
		})
	}
}

func TestFaultCount(t *testing.T) {
	sim, base := startSeries(t)
	require.NoError(t, sim.SetFault(cincinnatisim.Fault{Kind: cincinnatisim.FaultServerError, Count: 2}))
	require.Equal(t, http.StatusServiceUnavailable, get(t, base, "stable-4.16", "amd64").status)
	require.Equal(t, http.StatusServiceUnavailable, get(t, base, "stable-4.16", "amd64").status)
	require.Equal(t, http.StatusOK, get(t, base, "stable-4.16", "amd64").status)
}

func TestFaultLatency(t *testing.T) {
	sim, base := startSeries(t)
	require.NoError(t, sim.SetFault(cincinnatisim.Fault{Kind: cincinnatisim.FaultLatency, Latency: 2 * time.Second, Count: 1}))
	client := &http.Client{Timeout: 50 * time.Millisecond}
	_, err := client.Get(base + cincinnatisim.GraphPath + "?channel=stable-4.16&arch=amd64")
	require.Error(t, err)
	var uerr *url.Error
	require.ErrorAs(t, err, &uerr)
	require.True(t, uerr.Timeout(), "want a client timeout, got %v", err)

	// A short latency within the client's patience answers normally.
	require.NoError(t, sim.SetFault(cincinnatisim.Fault{Kind: cincinnatisim.FaultLatency, Latency: time.Millisecond}))
	getGraph(t, base, "stable-4.16", "amd64")
}

func TestSetFaultInvalid(t *testing.T) {
	sim := cincinnatisim.New()
	for _, f := range []cincinnatisim.Fault{
		{Kind: "explode"},
		{Kind: cincinnatisim.FaultLatency},
		{Kind: cincinnatisim.FaultServerError, Count: -1},
	} {
		require.ErrorIs(t, sim.SetFault(f), cincinnatisim.ErrInvalidFault)
	}
}

func TestAdminEndpoints(t *testing.T) {
	sim, base := startSeries(t, cincinnatisim.WithAdmin())
	do := func(method, path, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNoContent, do(http.MethodPost, "/admin/publish", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.12","payload":"quay.io/p@sha256:1"}`))
	require.Contains(t, versions(getGraph(t, base, "stable-4.16", "amd64")), "4.16.12")
	require.Equal(t, http.StatusBadRequest, do(http.MethodPost, "/admin/publish", `{"channel":"stable-4.16","arch":"amd64","version":"nope"}`))
	require.Equal(t, http.StatusNoContent, do(http.MethodPost, "/admin/remove", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.12"}`))
	require.Equal(t, http.StatusNotFound, do(http.MethodPost, "/admin/remove", `{"channel":"stable-4.16","arch":"amd64","version":"4.16.12"}`))

	require.Equal(t, http.StatusNoContent, do(http.MethodPost, "/admin/fault", `{"kind":"server_error","count":1}`))
	require.Equal(t, http.StatusServiceUnavailable, get(t, base, "stable-4.16", "amd64").status)
	require.Equal(t, http.StatusNoContent, do(http.MethodPost, "/admin/fault", `{"kind":"latency","latency_ms":1}`))
	require.Equal(t, http.StatusNoContent, do(http.MethodDelete, "/admin/fault", ""))
	require.Equal(t, http.StatusBadRequest, do(http.MethodPost, "/admin/fault", `{"kind":"latency"}`))
	require.Equal(t, http.StatusBadRequest, do(http.MethodPost, "/admin/fault", `{"kind":"server_error","bogus":1}`))
	require.Equal(t, http.StatusOK, get(t, base, "stable-4.16", "amd64").status)
	require.Equal(t, 3, sim.Requests(), "admin calls are not graph requests")
}

func TestAdminNotMountedByDefault(t *testing.T) {
	_, base := startSeries(t)
	resp, err := http.Post(base+"/admin/fault", "application/json", bytes.NewReader([]byte(`{"kind":"server_error"}`)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestNotAcceptable(t *testing.T) {
	_, base := startSeries(t)
	req, err := http.NewRequest(http.MethodGet, base+cincinnatisim.GraphPath+"?channel=stable-4.16&arch=amd64", http.NoBody)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotAcceptable, resp.StatusCode)
}

func TestConcurrency(t *testing.T) {
	sim, base := startSeries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	const readers, perReader = 8, 20
	errs := make(chan error, readers*perReader)
	for range readers {
		wg.Go(func() {
			for range perReader {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+cincinnatisim.GraphPath+"?channel=stable-4.16&arch=amd64", http.NoBody)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				var g cincinnatisim.Graph
				err = json.NewDecoder(resp.Body).Decode(&g)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK && err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Go(func() {
		for p := 12; p < 40; p++ {
			v := "4.16." + strconv.Itoa(p)
			if err := sim.Publish("stable-4.16", "amd64", v, ""); err != nil {
				errs <- err
			}
			if p%3 == 0 {
				sim.Remove("stable-4.16", "amd64", v)
			}
		}
	})
	wg.Go(func() {
		for i := range 20 {
			if i%2 == 0 {
				if err := sim.SetFault(cincinnatisim.Fault{Kind: cincinnatisim.FaultServerError, Count: 1}); err != nil {
					errs <- err
				}
			} else {
				sim.ClearFaults()
			}
			_, _ = sim.Graph("stable-4.16", "amd64")
		}
	})
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	require.NoError(t, errors.Join(all...))
	require.Equal(t, readers*perReader, sim.Requests())
	sim.ClearFaults()
	g := getGraph(t, base, "stable-4.16", "amd64")
	require.Contains(t, versions(g), "4.16.38")
	require.NotContains(t, versions(g), "4.16.36", "removed")
}
