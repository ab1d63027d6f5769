package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The API's request log is counted between two offsets, by caller and route; this program's requests are told by
// their request ids whatever their identity, and lines that are not request records are passed over.
func TestReadRequests(t *testing.T) {
	before := `{"msg":"request","request_id":"a1","method":"GET","route":"/api/hyperfleet/v1/clusters","identity":"hostedcluster-applier"}` + "\n"
	window := strings.Join([]string{
		`{"msg":"request","request_id":"a2","method":"GET","route":"/api/hyperfleet/v1/clusters/{cluster_id}","identity":"hostedcluster-applier"}`,
		`hyperfleet-api | {"msg":"request","request_id":"a3","method":"GET","route":"/api/hyperfleet/v1/clusters/{cluster_id}","identity":"hostedcluster-applier"}`,
		`{"msg":"request","request_id":"a4","method":"PUT","route":"/api/hyperfleet/v1/clusters/{cluster_id}/statuses","identity":"cluster-placer"}`,
		`{"msg":"request","request_id":"fleet-bench-7","method":"POST","route":"/api/hyperfleet/v1/clusters","identity":"developer"}`,
		`{"msg":"sequenced","batch":3}`,
		`not json`,
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "hyperfleet-api.log")
	require.NoError(t, os.WriteFile(path, []byte(before+window), 0o600))

	got, err := readRequests(path, int64(len(before)), int64(len(before+window)))
	require.NoError(t, err)
	require.Equal(t, map[string]caller{
		"hostedcluster-applier": {"GET /clusters/{cluster_id}": 2},
		"cluster-placer":        {"PUT /clusters/{cluster_id}/statuses": 1},
		self:                    {"POST /clusters": 1},
	}, got)
}

func TestRequestTotalSamples(t *testing.T) {
	tests := []struct {
		line, resource, value string
	}{
		{`apiserver_request_total{code="201",component="apiserver",dry_run="",group="hypershift.openshift.io",resource="hostedclusters",scope="resource",subresource="",verb="POST",version="v1beta1"} 42`, "hostedclusters", "42"},
		{`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 3`, "", "3"},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			sample := requestTotal.FindStringSubmatch(tt.line)
			require.NotNil(t, sample)
			require.Equal(t, tt.value, sample[2])
			got := ""
			if r := resourceLabel.FindStringSubmatch(sample[1]); r != nil {
				got = r[1]
			}
			require.Equal(t, tt.resource, got)
		})
	}
	require.Nil(t, requestTotal.FindStringSubmatch(`apiserver_request_total_other{verb="GET"} 1`))
}
