// Package integration drives a real hyperfleet-api (in process, on real listeners) through the generated client
// against a fresh PostgreSQL database per test.
package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// apiServer is one running hyperfleet-api and clients for it. Every answer either client gets is checked against
// openapi/openapi.yaml (harness.Contract): a violation fails the test.
type apiServer struct {
	*api.ClientWithResponses
	// http is a plain client for requests the generated client cannot make (malformed bodies, odd headers).
	http *http.Client
	// transport carries both clients' requests; runtimes started by a test use it too.
	transport http.RoundTripper
	base      string
	health    string
	metrics   string
	dsn       string
}

// startServer serves a fresh database on loopback ports and stops it when the test ends. Clusters and node
// pools require the adapter "applier", so deletes wait for it; startServerWith chooses.
func startServer(tb testing.TB) *apiServer {
	tb.Helper()
	return startServerWith(tb, map[string][]string{"cluster": {"applier"}, "nodepool": {"applier"}})
}

func startServerWith(tb testing.TB, required map[string][]string) *apiServer {
	tb.Helper()
	dsn := harness.NewDatabase(tb)
	return startServerOn(tb, dsn, server.Config{RequiredAdapters: required})
}

// defaultStream is the VersionStream every test database starts with, so that clusters can name it.
const defaultStream = "stable-4-16"

func startServerOn(tb testing.TB, dsn string, overrides server.Config) *apiServer {
	tb.Helper()
	seedStream(tb, dsn, defaultStream)
	cfg := overrides
	cfg.DB.URL = dsn
	srv := apitest.Start(tb, cfg)
	// Each server gets its own client transport, so that its idle connections can be closed before the server
	// drains (apitest.Start says why).
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	tb.Cleanup(transport.CloseIdleConnections)
	base := srv.API
	checked := harness.NewContract(tb).Transport(tb, transport)
	client, err := api.NewClientWithResponses(base, api.WithHTTPClient(&http.Client{Transport: checked}))
	require.NoError(tb, err)
	return &apiServer{ClientWithResponses: client, http: &http.Client{Transport: checked}, transport: checked, base: base,
		health: srv.Health, metrics: srv.Metrics, dsn: dsn}
}

func ctxFor(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// problem decodes a problem+json body and checks its envelope.
func problem(tb testing.TB, resp *http.Response, body []byte, wantStatus int, wantCode string) api.Problem {
	tb.Helper()
	require.Equal(tb, wantStatus, resp.StatusCode, "body: %s", body)
	require.Equal(tb, "application/problem+json", resp.Header.Get("Content-Type"))
	var p api.Problem
	require.NoError(tb, json.Unmarshal(body, &p))
	require.Equal(tb, wantStatus, p.Status)
	require.Equal(tb, wantCode, p.Code, "detail: %v", deref(p.Detail))
	require.NotEmpty(tb, deref(p.RequestId))
	require.Equal(tb, resp.Header.Get("X-Request-Id"), deref(p.RequestId))
	return p
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func clusterSpec(stream string) api.ClusterSpec {
	return api.ClusterSpec{VersionStream: stream, HostedCluster: &api.HostedClusterSpec{
		Dns: &api.HostedClusterDNS{BaseDomain: ptr("example.com")},
	}}
}

func nodePoolSpec(replicas int) api.NodePoolSpec {
	var spec api.NodePoolSpec
	spec.Replicas = replicas
	spec.Platform.Hivelocity = api.HivelocityPlatform{DeviceType: "s1.small", Region: "LAX2"}
	return spec
}

func createCluster(tb testing.TB, s *apiServer, name string, labels map[string]string) *api.Cluster {
	tb.Helper()
	body := api.ClusterCreate{Name: name, Spec: clusterSpec(defaultStream)}
	if labels != nil {
		body.Labels = ptr(api.Labels(labels))
	}
	resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, body)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

func createNodePool(tb testing.TB, s *apiServer, cluster *api.Cluster, name string, replicas int) *api.NodePool {
	tb.Helper()
	resp, err := s.CreateNodePoolWithResponse(ctxFor(tb), cluster.Id, nil, api.NodePoolCreate{Name: name, Spec: nodePoolSpec(replicas)})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// seedStream creates a VersionStream through the resource service, before the server starts, so that tests
// with authentication on need no token for it. An existing one is left alone.
func seedStream(tb testing.TB, dsn, name string) {
	tb.Helper()
	doc, err := schema.Load(openapi.Document())
	require.NoError(tb, err)
	set, err := kinds.Build(doc, api.Kinds(), nil)
	require.NoError(tb, err)
	svc := resource.NewService(postgres.NewStore(harness.OpenGorm(tb, dsn), set.All), set.All)
	ctx := resource.WithCaller(ctxFor(tb), resource.Caller{Name: "test-seed", Admin: true})
	_, err = svc.Create(ctx, set.VersionStream, "", resource.CreateInput{Name: name, Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	var rerr *resource.Error
	if errors.As(err, &rerr) && rerr.Code == resource.CodeNameTaken {
		return
	}
	require.NoError(tb, err)
}

// harnessDB opens the server's database directly, to check what the API cannot show.
func harnessDB(tb testing.TB, s *apiServer) *gorm.DB {
	tb.Helper()
	return harness.OpenGorm(tb, s.dsn)
}
