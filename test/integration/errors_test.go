package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
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
			resp, err := s.CreateClusterWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(tc.body))
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
	require.Equal(t, int64(0), deref(list.JSON200.Total), "nothing half-written")
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
		{"wrong media type", "text/plain", `{"labels":{}}`, 415, "HYPERFLEET-VAL-009"},
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

// An id that is a UUID but names nothing is a 404; one that is not a UUID cannot name anything, and the document
// says format: uuid, so it is a 400 naming the path parameter.
func TestUnknownIDsAndRoutesAre404Problems(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		path   string
		status int
		code   string
	}{
		{"/api/hyperfleet/v1/clusters/0193a4c4-0000-7000-8000-000000000000", http.StatusNotFound, "HYPERFLEET-NTF-001"},
		{"/api/hyperfleet/v1/clusters/0193A4C4-0000-7000-8000-00000000000F/nodepools", http.StatusNotFound, "HYPERFLEET-NTF-001"},
		{"/api/hyperfleet/v1/nothing", http.StatusNotFound, "HYPERFLEET-NTF-001"},
		{"/api/hyperfleet/v1/clusters/not-a-uuid", http.StatusBadRequest, "HYPERFLEET-VAL-010"},
		{"/api/hyperfleet/v1/clusters/0193a4c400007000800000000000000f", http.StatusBadRequest, "HYPERFLEET-VAL-010"},
		{"/api/hyperfleet/v1/clusters/%7B0193a4c4-0000-7000-8000-000000000000%7D", http.StatusBadRequest, "HYPERFLEET-VAL-010"},
		{"/api/hyperfleet/v1/clusters/0193a4c4-0000-7000-8000-000000000000/nodepools/x", http.StatusBadRequest, "HYPERFLEET-VAL-010"},
		{"/api/hyperfleet/v1/clusters/x/nodepools", http.StatusBadRequest, "HYPERFLEET-VAL-010"},
		{"/api/hyperfleet/v1/versionstreams/x/statuses", http.StatusBadRequest, "HYPERFLEET-VAL-010"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := s.http.Get(s.base + tt.path)
			require.NoError(t, err)
			p := problem(t, resp, []byte(readAll(t, resp)), tt.status, tt.code)
			if tt.status == http.StatusBadRequest {
				require.NotNil(t, p.Errors)
				require.Contains(t, (*p.Errors)[0].Field, "_id")
			}
		})
	}
}

// Media types are case-insensitive, and a body the operation does not take is a 415 before it is read.
func TestMediaTypes(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "typed", nil)
	create := `{"name":"typed-%d","spec":{"version_stream":"stable-4-16","hosted_cluster":{"dns":{"base_domain":"example.com"}}}}`
	tests := []struct {
		method, contentType string
		status              int
	}{
		{http.MethodPatch, "Application/Merge-Patch+JSON", http.StatusOK},
		{http.MethodPatch, "application/merge-patch+json; charset=UTF-8", http.StatusOK},
		{http.MethodPatch, "APPLICATION/JSON", http.StatusOK},
		{http.MethodPatch, "application/json-patch+json", http.StatusUnsupportedMediaType},
		{http.MethodPatch, "application/merge-patch+json; charset=latin1", http.StatusUnsupportedMediaType},
		{http.MethodPost, "Application/JSON", http.StatusCreated},
		{http.MethodPost, "", http.StatusCreated},
		{http.MethodPost, "text/plain", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/merge-patch+json", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/json; charset", http.StatusUnsupportedMediaType},
	}
	for i, tt := range tests {
		t.Run(tt.method+" "+tt.contentType, func(t *testing.T) {
			path, body := "/api/hyperfleet/v1/clusters", fmt.Sprintf(create, i)
			if tt.method == http.MethodPatch {
				path, body = path+"/"+c.Id.String(), fmt.Sprintf(`{"labels":{"n":"%d"}}`, i)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, s.base+path, strings.NewReader(body))
			require.NoError(t, err)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := s.http.Do(req)
			require.NoError(t, err)
			raw := readAll(t, resp)
			if tt.status == http.StatusUnsupportedMediaType {
				problem(t, resp, []byte(raw), tt.status, "HYPERFLEET-VAL-009")
				return
			}
			require.Equal(t, tt.status, resp.StatusCode, "body: %s", raw)
		})
	}
	// Reports take JSON too.
	resp, err := s.PostClusterStatusWithBodyWithResponse(ctx, c.Id, "text/plain", strings.NewReader(`{}`))
	require.NoError(t, err)
	problem(t, resp.HTTPResponse, resp.Body, http.StatusUnsupportedMediaType, "HYPERFLEET-VAL-009")
}

// A parent id spelled in capitals reaches the same parent, and what the API sends back (Location, href,
// owner_references) spells it the way the API does.
func TestParentIDsAreNormalised(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "shouted", nil)
	upper := strings.ToUpper(c.Id.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/hyperfleet/v1/clusters/"+upper+"/nodepools",
		strings.NewReader(`{"name":"workers","spec":{"replicas":1,"platform":{"hivelocity":{"device_type":"s1.small","region":"LAX2"}}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	require.NoError(t, err)
	raw := readAll(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", raw)
	var np api.NodePool
	require.NoError(t, json.Unmarshal([]byte(raw), &np))
	lower := c.Id.String()
	want := "/api/hyperfleet/v1/clusters/" + lower + "/nodepools/" + np.Id.String()
	require.Equal(t, want, resp.Header.Get("Location"))
	require.Equal(t, want, np.Href)
	require.Equal(t, "/api/hyperfleet/v1/clusters/"+lower, np.OwnerReferences.Href)
	require.NotContains(t, raw, upper)

	got, err := s.http.Get(s.base + "/api/hyperfleet/v1/clusters/" + upper + "/nodepools/" + strings.ToUpper(np.Id.String()))
	require.NoError(t, err)
	body := readAll(t, got)
	require.Equal(t, http.StatusOK, got.StatusCode, "body: %s", body)
	require.NotContains(t, body, upper)
}

func TestOversizedBodiesAre413(t *testing.T) {
	dsn := harness.NewDatabase(t)
	s := startServerOn(t, dsn, server.Config{MaxBodyBytes: 4096})
	ctx := ctxFor(t)
	body := `{"name":"big","spec":{"version_stream":"stable-4-16","hosted_cluster":{"ssh_public_key":"` + strings.Repeat("k", 8000) + `"}}}`
	resp, err := s.CreateClusterWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(body))
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

// JSON member names are case-sensitive and each is sent once: Go's decoder would take "NAME" for name and keep
// one of two values silently, so both are refused, at any depth, and nothing is stored.
func TestMembersAreExactAndUnique(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "exact", nil)
	spec := `"spec":{"version_stream":"stable-4-16","hosted_cluster":{"dns":{"base_domain":"example.com"}}}`
	now := time.Now().UTC().Format(time.RFC3339)
	tests := []struct {
		name, method, path, body, field string
	}{
		{"create, NAME", http.MethodPost, "/clusters", `{"NAME":"shout",` + spec + `}`, "NAME"},
		{"create, Spec", http.MethodPost, "/clusters", `{"name":"shout","Spec":{"version_stream":"stable-4-16"}}`, "Spec"},
		{"create, name twice", http.MethodPost, "/clusters", `{"name":"one","name":"two",` + spec + `}`, "name"},
		{"create, a spec member twice", http.MethodPost, "/clusters",
			`{"name":"dup","spec":{"version_stream":"stable-4-16","version_stream":"other"}}`, "spec.version_stream"},
		{"create, a label twice", http.MethodPost, "/clusters", `{"name":"dup","labels":{"a":"1","a":"2"},` + spec + `}`, "labels.a"},
		{"patch, Labels", http.MethodPatch, "/clusters/" + c.Id.String(), `{"Labels":{"a":"1"}}`, "Labels"},
		{"patch, spec twice", http.MethodPatch, "/clusters/" + c.Id.String(), `{"spec":{},"spec":{}}`, "spec"},
		{"report, Adapter", http.MethodPut, "/clusters/" + c.Id.String() + "/statuses",
			`{"Adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}]}`, "Adapter"},
		{"report, a condition's Type", http.MethodPut, "/clusters/" + c.Id.String() + "/statuses",
			`{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"Type":"Available","status":"True"}]}`, "conditions[0].Type"},
		{"report, data member twice", http.MethodPut, "/clusters/" + c.Id.String() + "/statuses",
			`{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}],"data":{"x":1,"x":2}}`, "data.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tt.method, s.base+"/api/hyperfleet/v1"+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := s.http.Do(req)
			require.NoError(t, err)
			p := problem(t, resp, []byte(readAll(t, resp)), http.StatusBadRequest, "HYPERFLEET-VAL-001")
			require.NotNil(t, p.Errors)
			require.Equal(t, tt.field, (*p.Errors)[0].Field)
		})
	}
	list, err := s.ListClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, deref(list.JSON200.Total), "nothing was created")
	got := getCluster(t, s, c)
	require.Empty(t, got.Labels, "nothing was changed")
	statuses, err := s.ListClusterStatusesWithResponse(ctx, c.Id)
	require.NoError(t, err)
	for _, st := range statuses.JSON200.Items {
		require.Zero(t, st.ObservedGeneration, "no report was stored")
	}
}
