package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/server"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func readAll(tb testing.TB, resp *http.Response) string {
	tb.Helper()
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return string(b)
}

func TestBadCreatesAreRejectedWithProblems(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	long := strings.Repeat("a", 54)
	tests := []struct {
		name       string
		body       string
		status     int
		code       string
		wantFields []string
	}{
		{"not json", `{"name":`, 400, "HYPERFLEET-VAL-001", nil},
		{"empty body", ``, 400, "HYPERFLEET-VAL-001", nil},
		{"two objects", `{"name":"abc","spec":{"version_stream":"stable-4-16"}} {}`, 400, "HYPERFLEET-VAL-001", nil},
		{"unknown top-level field", `{"name":"abc","spec":{"version_stream":"stable-4-16"},"colour":"red"}`, 400, "HYPERFLEET-VAL-001", []string{"colour"}},
		{"name of wrong type", `{"name":5,"spec":{"version_stream":"stable-4-16"}}`, 400, "HYPERFLEET-VAL-001", []string{"name"}},
		{"name too short", `{"name":"ab","spec":{"version_stream":"stable-4-16"}}`, 400, "HYPERFLEET-VAL-002", []string{"name"}},
		{"name too long", `{"name":"` + long + `","spec":{"version_stream":"stable-4-16"}}`, 400, "HYPERFLEET-VAL-002", []string{"name"}},
		{"name not a DNS label", `{"name":"Prod_East","spec":{"version_stream":"stable-4-16"}}`, 400, "HYPERFLEET-VAL-002", []string{"name"}},
		{"name ends with dash", `{"name":"prod-","spec":{"version_stream":"stable-4-16"}}`, 400, "HYPERFLEET-VAL-002", []string{"name"}},
		{"missing spec", `{"name":"abc"}`, 400, "HYPERFLEET-VAL-002", []string{"spec.version_stream"}},
		{"spec not an object", `{"name":"abc","spec":[1]}`, 400, "HYPERFLEET-VAL-001", []string{"spec"}},
		{"unknown spec field", `{"name":"abc","spec":{"version_stream":"stable-4-16","colour":"red"}}`, 400, "HYPERFLEET-VAL-002", []string{"spec.colour"}},
		{"enum violated", `{"name":"abc","spec":{"version_stream":"stable-4-16","hosted_cluster":{"controller_availability_policy":"Sometimes"}}}`, 400, "HYPERFLEET-VAL-002", []string{"spec.hosted_cluster.controller_availability_policy"}},
		{"several problems at once", `{"name":"A","labels":{"-bad":"x"},"spec":{"version_stream":""}}`, 400, "HYPERFLEET-VAL-002", []string{"name", "labels.-bad", "spec.version_stream"}},
		{"label value too long", `{"name":"abc","labels":{"k":"` + strings.Repeat("v", 256) + `"},"spec":{"version_stream":"stable-4-16"}}`, 400, "HYPERFLEET-VAL-002", []string{"labels.k"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.CreateClusterWithBodyWithResponse(ctx, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			p := problem(t, resp.HTTPResponse, resp.Body, tc.status, tc.code)
			var fields []string
			for _, f := range deref(p.Errors) {
				fields = append(fields, f.Field)
				require.NotEmpty(t, f.Message)
			}
			for _, want := range tc.wantFields {
				require.Contains(t, fields, want)
			}
		})
	}
	list, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{IncludeDeleted: ptr(true)})
	require.NoError(t, err)
	require.Equal(t, int64(0), list.JSON200.Total, "nothing half-written")
}

func TestBadPatchesChangeNothing(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "steady", map[string]string{"env": "prod"})
	tests := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"spec made invalid", "application/merge-patch+json", `{"spec":{"version_stream":null}}`, 400, "HYPERFLEET-VAL-002"},
		{"unknown member", "application/merge-patch+json", `{"name":"other"}`, 400, "HYPERFLEET-VAL-001"},
		{"label value not a string", "application/merge-patch+json", `{"labels":{"env":5}}`, 400, "HYPERFLEET-VAL-001"},
		{"empty patch", "application/merge-patch+json", `{}`, 400, "HYPERFLEET-VAL-002"},
		{"wrong media type", "text/plain", `{"labels":{}}`, 400, "HYPERFLEET-VAL-001"},
		{"spec not an object", "application/json", `{"spec":"x"}`, 400, "HYPERFLEET-VAL-001"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.PatchClusterWithBodyWithResponse(ctx, c.Id, nil, tc.contentType, strings.NewReader(tc.body))
			require.NoError(t, err)
			problem(t, resp.HTTPResponse, resp.Body, tc.status, tc.code)
		})
	}
	got, err := s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, c.Spec, got.JSON200.Spec)
	require.Equal(t, c.Labels, got.JSON200.Labels)
	require.Equal(t, int64(1), got.JSON200.Generation)
}

func TestUnknownIDsAndRoutesAre404Problems(t *testing.T) {
	s := startServer(t)
	for _, path := range []string{
		"/api/hyperfleet/v1/clusters/not-a-uuid",
		"/api/hyperfleet/v1/clusters/0193a4c4-0000-7000-8000-000000000000",
		"/api/hyperfleet/v1/clusters/0193a4c4-0000-7000-8000-000000000000/nodepools/x",
		"/api/hyperfleet/v1/nothing",
	} {
		t.Run(path, func(t *testing.T) {
			resp, err := s.http.Get(s.base + path)
			require.NoError(t, err)
			problem(t, resp, []byte(readAll(t, resp)), http.StatusNotFound, "HYPERFLEET-NTF-001")
		})
	}
}

func TestOversizedBodiesAre413(t *testing.T) {
	dsn := harness.NewDatabase(t)
	s := startServerOn(t, dsn, server.Config{MaxBodyBytes: 4096})
	ctx := ctxFor(t)
	body := `{"name":"big","spec":{"version_stream":"stable-4-16","hosted_cluster":{"ssh_public_key":"` + strings.Repeat("k", 8000) + `"}}}`
	resp, err := s.CreateClusterWithBodyWithResponse(ctx, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	problem(t, resp.HTTPResponse, resp.Body, http.StatusRequestEntityTooLarge, "HYPERFLEET-LMT-001")

	// Without a Content-Length the limit still holds while reading.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/hyperfleet/v1/clusters", io.MultiReader(strings.NewReader(body)))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	raw, err := s.http.Do(req)
	require.NoError(t, err)
	problem(t, raw, []byte(readAll(t, raw)), http.StatusRequestEntityTooLarge, "HYPERFLEET-LMT-001")
}
