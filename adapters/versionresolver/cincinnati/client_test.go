package cincinnati

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sampleGraph = `{
  "version": 1,
  "nodes": [
    {"version": "4.15.30", "payload": "quay.io/ocp-release@sha256:a", "metadata": {"io.openshift.upgrades.graph.release.channels": "stable-4.16"}},
    {"version": "4.16.9", "payload": "quay.io/ocp-release@sha256:b"},
    {"version": "4.16.10", "payload": "quay.io/ocp-release@sha256:c", "metadata": {"url": "https://access.redhat.com/errata/RHSA-2024:1"}}
  ],
  "edges": [[0, 1], [1, 2]],
  "conditionalEdges": [{"edges": [{"from": "4.16.9", "to": "4.16.10"}], "risks": []}]
}`

// newServer serves handler behind a check of the request the client sends.
func newServer(tb testing.TB, wantChannel, wantArch string, handler http.HandlerFunc) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != GraphPath ||
			r.Header.Get("Accept") != "application/json" ||
			r.URL.Query().Get("channel") != wantChannel || r.URL.Query().Get("arch") != wantArch {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(`{"kind":"test_mismatch","value":"` + r.Method + " " + r.URL.String() + " accept=" + r.Header.Get("Accept") + `"}`))
			return
		}
		handler(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func writeBody(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func TestGraphSuccess(t *testing.T) {
	for _, arch := range []string{"amd64", "multi"} {
		t.Run(arch, func(t *testing.T) {
			srv := newServer(t, "stable-4.16", arch, writeBody(http.StatusOK, sampleGraph))
			c := NewClient(srv.URL, srv.Client())

			g, err := c.Graph(context.Background(), Channel("stable", "4.16"), arch)
			require.NoError(t, err)
			require.Equal(t, 1, g.Version)
			require.Len(t, g.Nodes, 3)
			require.Equal(t, Node{Version: "4.16.10", Payload: "quay.io/ocp-release@sha256:c",
				Metadata: map[string]string{"url": "https://access.redhat.com/errata/RHSA-2024:1"}}, g.Nodes[2])
			require.Equal(t, [][2]int{{0, 1}, {1, 2}}, g.Edges)
			require.NotEmpty(t, g.ConditionalEdges)

			got, err := Latest(g, "4.16", false)
			require.NoError(t, err)
			require.Equal(t, Release{Version: "4.16.10", Image: "quay.io/ocp-release@sha256:c"}, got)
		})
	}
}

func TestGraphBaseURLPrefix(t *testing.T) {
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		writeBody(http.StatusOK, `{"version":1,"nodes":[],"edges":[]}`)(w, r)
	}))
	t.Cleanup(srv.Close)

	g, err := NewClient(srv.URL+"/proxy/", srv.Client()).Graph(context.Background(), "stable-4.16", "amd64")
	require.NoError(t, err)
	require.Empty(t, g.Nodes)
	require.Equal(t, "/proxy"+GraphPath, gotPath)
}

func TestGraphErrors(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		opts     []Option
		wantErr  error
		notErr   []error
		wantText []string
	}{
		{
			name:     "missing channel",
			handler:  writeBody(http.StatusBadRequest, `{"kind":"invalid_params","value":"channel 'stable-4.99' not found"}`),
			wantErr:  ErrRejected,
			notErr:   []error{ErrUnavailable, ErrBadResponse},
			wantText: []string{"400", "invalid_params", "channel 'stable-4.99' not found"},
		},
		{
			name:     "4xx without cincinnati body",
			handler:  writeBody(http.StatusNotFound, `<html>not found</html>`),
			wantErr:  ErrRejected,
			wantText: []string{"404"},
		},
		{
			name:     "5xx",
			handler:  writeBody(http.StatusInternalServerError, `{"kind":"upstream_error","value":"quay down"}`),
			wantErr:  ErrUnavailable,
			notErr:   []error{ErrRejected, ErrBadResponse},
			wantText: []string{"500", "upstream_error", "quay down"},
		},
		{name: "503 no body", handler: writeBody(http.StatusServiceUnavailable, ``), wantErr: ErrUnavailable, wantText: []string{"503"}},
		{name: "429", handler: writeBody(http.StatusTooManyRequests, `{}`), wantErr: ErrUnavailable, notErr: []error{ErrRejected}},
		{name: "408", handler: writeBody(http.StatusRequestTimeout, ``), wantErr: ErrUnavailable, notErr: []error{ErrRejected}},
		{
			name: "latency beyond timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
				writeBody(http.StatusOK, sampleGraph)(w, r)
			},
			opts:    []Option{WithTimeout(50 * time.Millisecond)},
			wantErr: ErrUnavailable,
			notErr:  []error{ErrBadResponse},
		},
		{
			name: "body stalls beyond timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"version":1,"nodes":[`))
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			opts:    []Option{WithTimeout(50 * time.Millisecond)},
			wantErr: ErrUnavailable,
		},
		{
			name:     "invalid JSON",
			handler:  writeBody(http.StatusOK, `{"version":1,"nodes":[{"version":`),
			wantErr:  ErrBadResponse,
			notErr:   []error{ErrUnavailable, ErrRejected},
			wantText: []string{"decode"},
		},
		{name: "wrong JSON shape", handler: writeBody(http.StatusOK, `{"nodes":"4.16.1"}`), wantErr: ErrBadResponse},
		{name: "HTML instead of JSON", handler: writeBody(http.StatusOK, `<html></html>`), wantErr: ErrBadResponse},
		{
			name:     "body over the cap",
			handler:  writeBody(http.StatusOK, sampleGraph),
			opts:     []Option{WithMaxBodyBytes(64)},
			wantErr:  ErrBadResponse,
			notErr:   []error{ErrUnavailable},
			wantText: []string{"larger than 64 bytes"},
		},
		{
			name: "endless body over the cap",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"version":1,"nodes":[`))
				chunk := []byte(strings.Repeat(`{"version":"4.16.1","payload":"x"},`, 1000))
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			},
			opts:    []Option{WithMaxBodyBytes(1 << 20)},
			wantErr: ErrBadResponse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, "stable-4.16", "amd64", tt.handler)
			c := NewClient(srv.URL, srv.Client(), tt.opts...)

			g, err := c.Graph(context.Background(), "stable-4.16", "amd64")
			require.Nil(t, g)
			require.ErrorIs(t, err, tt.wantErr)
			for _, e := range tt.notErr {
				require.False(t, errors.Is(err, e), "error %q must not be %v", err, e)
			}
			for _, s := range tt.wantText {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestGraphBodyExactlyAtCap(t *testing.T) {
	srv := newServer(t, "stable-4.16", "amd64", writeBody(http.StatusOK, sampleGraph))
	c := NewClient(srv.URL, srv.Client(), WithMaxBodyBytes(int64(len(sampleGraph))))
	_, err := c.Graph(context.Background(), "stable-4.16", "amd64")
	require.NoError(t, err)
}

func TestGraphUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	_, err := NewClient(url, nil).Graph(context.Background(), "stable-4.16", "amd64")
	require.ErrorIs(t, err, ErrUnavailable)
}

func TestGraphCallerContext(t *testing.T) {
	srv := newServer(t, "stable-4.16", "amd64", writeBody(http.StatusOK, sampleGraph))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := NewClient(srv.URL, srv.Client()).Graph(ctx, "stable-4.16", "amd64")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
}

func TestGraphUserAgent(t *testing.T) {
	var got string
	srv := newServer(t, "stable-4.16", "amd64", func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("User-Agent")
		writeBody(http.StatusOK, sampleGraph)(w, r)
	})
	_, err := NewClient(srv.URL, srv.Client(), WithUserAgent("version-resolver/test")).Graph(context.Background(), "stable-4.16", "amd64")
	require.NoError(t, err)
	require.Equal(t, "version-resolver/test", got)
}

func TestGraphInvalidBaseURL(t *testing.T) {
	for _, base := range []string{"", "api.openshift.com", "://bad"} {
		_, err := NewClient(base, nil).Graph(context.Background(), "stable-4.16", "amd64")
		require.Error(t, err, base)
		require.False(t, errors.Is(err, ErrUnavailable), base)
	}
}

func TestNewClientDoesNotModifyHTTPClient(t *testing.T) {
	hc := &http.Client{}
	_ = NewClient("http://example.invalid", hc, WithTimeout(time.Millisecond))
	require.Zero(t, hc.Timeout)
}

// The parser reads real conditional edges: risks and matching rules as graph-data declares them (see
// ../testdata/graphs/README.md), and every edge names releases of the graph. Choosing a release ignores them for now.
func TestGraphParsesRealConditionalEdges(t *testing.T) {
	tests := []struct {
		channel    string
		wantRisk   Risk // one risk of the graph, in full
		wantEdge   Edge // one edge it gates
		wantLatest string
	}{
		{
			channel: "stable-4.16",
			wantRisk: Risk{Name: "HyperShiftKubeAPIPort443", URL: "https://issues.redhat.com/browse/HOSTEDCP-1849",
				Message:       "Hosted/HyperShift clusters where HostedCluster spec.networking.apiServer.port is 443 can have trouble with Pods on compute Nodes connecting to the internal Kubernetes API service via the service IP.",
				MatchingRules: []MatchingRule{{Type: RulePromQL, PromQL: &PromQL{PromQL: "group by (_id, invoker) (cluster_installer{_id=\"\",invoker=\"hypershift\"})\nor\n0 * group by (_id, invoker) (cluster_installer{_id=\"\"})\n"}}}},
			wantEdge:   Edge{From: "4.15.14", To: "4.15.17"},
			wantLatest: "4.16.6",
		},
		{
			channel: "stable-4.15",
			wantRisk: Risk{Name: "ServiceAccountsOAuth", URL: "https://issues.redhat.com/browse/AUTH-517",
				Message:       "ServiceAccounts cannot be used as OAuth2 clients in clusters where internal image registry is disabled.",
				MatchingRules: []MatchingRule{{Type: RulePromQL, PromQL: &PromQL{PromQL: "bottomk(1,\n  0 * group by (deployment) (kube_deployment_spec_replicas{_id=\"\",namespace=\"openshift-image-registry\",deployment=\"image-registry\"} > 0)\n  or\n  group(kube_deployment_spec_replicas{_id=\"\"})\n)\n"}}}},
			wantEdge:   Edge{From: "4.14.18", To: "4.15.10"},
			wantLatest: "4.15.12",
		},
	}
	for _, tt := range tests {
		t.Run(tt.channel, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "testdata", "graphs", tt.channel+"_amd64.json"))
			require.NoError(t, err)
			srv := newServer(t, tt.channel, "amd64", writeBody(http.StatusOK, string(body)))
			g, err := NewClient(srv.URL, srv.Client()).Graph(context.Background(), tt.channel, "amd64")
			require.NoError(t, err)
			require.NotEmpty(t, g.ConditionalEdges)

			versions := map[string]int{}
			for i, n := range g.Nodes {
				versions[n.Version] = i
			}
			plain := map[Edge]bool{}
			for _, e := range g.Edges {
				plain[Edge{g.Nodes[e[0]].Version, g.Nodes[e[1]].Version}] = true
			}
			var found, gated bool
			for _, ce := range g.ConditionalEdges {
				require.NotEmpty(t, ce.Edges)
				require.NotEmpty(t, ce.Risks)
				for _, e := range ce.Edges {
					require.Contains(t, versions, e.From)
					require.Contains(t, versions, e.To)
					require.False(t, plain[e], "%v is both plain and conditional", e)
				}
				for _, r := range ce.Risks {
					require.NotEmpty(t, r.Name)
					require.NotEmpty(t, r.URL)
					require.NotEmpty(t, r.MatchingRules)
					if r.Name == tt.wantRisk.Name {
						require.Equal(t, tt.wantRisk, r)
						found = true
						gated = gated || slices.Contains(ce.Edges, tt.wantEdge)
					}
				}
			}
			require.True(t, found, "risk %s", tt.wantRisk.Name)
			require.True(t, gated, "%v gated by %s", tt.wantEdge, tt.wantRisk.Name)

			minor := strings.TrimPrefix(tt.channel, "stable-")
			got, err := Latest(g, minor, false)
			require.NoError(t, err)
			require.Equal(t, tt.wantLatest, got.Version, "selection still takes the newest node of the minor")
		})
	}
}
