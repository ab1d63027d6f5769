package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// What HyperShift refuses is refused by the API first, with a field to blame: the rules of the HostedCluster CRD
// that OpenAPI 3.0 cannot state, and the fields HyperShift will not change once a HostedCluster exists.
func TestClusterSpecRulesAndImmutableFields(t *testing.T) {
	s := startServer(t)
	post := func(hostedCluster string) (*http.Response, string) {
		t.Helper()
		resp, err := s.http.Post(s.base+"/api/hyperfleet/v1/clusters", "application/json",
			strings.NewReader(`{"name":"rules","spec":{"version_stream":"`+defaultStream+`","hosted_cluster":`+hostedCluster+`}}`))
		require.NoError(t, err)
		return resp, readAll(t, resp)
	}
	rules := []struct {
		name          string
		hostedCluster string
		field         string
	}{
		{"Agent without its namespace", `{"platform":{"type":"Agent"}}`, "spec.hosted_cluster.platform.agent"},
		{"a service twice", `{"services":[{"service":"APIServer","type":"Route"},{"service":"APIServer","type":"Route"},
			{"service":"OAuthServer","type":"Route"},{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]}`,
			"spec.hosted_cluster.services[1].service"},
		{"a required service missing", `{"services":[{"service":"APIServer","type":"Route"},{"service":"OAuthServer","type":"Route"},
			{"service":"Konnectivity","type":"Route"},{"service":"OVNSbDb","type":"Route"}]}`, "spec.hosted_cluster.services"},
		{"NodePort without an address", `{"services":[{"service":"APIServer","type":"NodePort"},{"service":"OAuthServer","type":"Route"},
			{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]}`, "spec.hosted_cluster.services[0].address"},
		{"GCP", `{"platform":{"type":"GCP"}}`, "spec.hosted_cluster.platform.type"},
	}
	for _, tt := range rules {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(tt.hostedCluster)
			p := problem(t, resp, []byte(body), http.StatusBadRequest, "HYPERFLEET-VAL-002")
			var fields []string
			for _, e := range deref(p.Errors) {
				fields = append(fields, e.Field)
			}
			require.Contains(t, fields, tt.field, body)
		})
	}

	resp, body := post(`{"dns":{"base_domain":"example.com"},"fips":true,"platform":{"type":"Agent","agent":{"agent_namespace":"agents"}}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	created := createdCluster(t, s)
	immutable := []struct {
		name  string
		patch string
		field string
	}{
		{"base domain", `{"dns":{"base_domain":"other.com"}}`, "spec.hosted_cluster.dns.base_domain"},
		{"fips", `{"fips":false}`, "spec.hosted_cluster.fips"},
		{"platform", `{"platform":{"type":"None","agent":null}}`, "spec.hosted_cluster.platform"},
		{"services", `{"services":[{"service":"APIServer","type":"LoadBalancer"},{"service":"OAuthServer","type":"Route"},
			{"service":"Konnectivity","type":"Route"},{"service":"Ignition","type":"Route"}]}`, "spec.hosted_cluster.services"},
	}
	for _, tt := range immutable {
		t.Run("immutable "+tt.name, func(t *testing.T) {
			resp, err := s.PatchClusterWithBodyWithResponse(ctxFor(t), created.Id, nil, "application/merge-patch+json",
				strings.NewReader(`{"spec":{"hosted_cluster":`+tt.patch+`}}`))
			require.NoError(t, err)
			p := problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-007")
			require.Equal(t, tt.field, deref(p.Errors)[0].Field)
		})
	}
	// Fields that may change still do, and an unchanged immutable field is no change.
	patched, err := s.PatchClusterWithBodyWithResponse(ctxFor(t), created.Id, nil, "application/merge-patch+json",
		strings.NewReader(`{"spec":{"hosted_cluster":{"fips":true,"ssh_public_key":"ssh-ed25519 AAAA","node_selector":{"role":"hcp"}}}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), "body: %s", patched.Body)
	require.Equal(t, int64(2), patched.JSON200.Generation)
}

// createdCluster returns the only cluster of the server.
func createdCluster(tb testing.TB, s *apiServer) api.Cluster {
	tb.Helper()
	list, err := s.ListClustersWithResponse(ctxFor(tb), nil)
	require.NoError(tb, err)
	require.Len(tb, list.JSON200.Items, 1)
	return list.JSON200.Items[0]
}
