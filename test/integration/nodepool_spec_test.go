package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The node pool spec the Hivelocity provisioner reads is checked at the API: the schema's bounds and patterns, and
// the selector's keys, which become part of device tags (caphvlabel:<key>=<value>) and which OpenAPI 3.0 cannot
// constrain.
func TestNodePoolSpecIsValidated(t *testing.T) {
	s := startServer(t)
	c := createCluster(t, s, "pools", nil)
	post := func(spec string) *http.Response {
		t.Helper()
		resp, err := s.http.Post(s.base+"/api/hyperfleet/v1/clusters/"+c.Id.String()+"/nodepools", "application/json",
			strings.NewReader(`{"name":"workers","spec":`+spec+`}`))
		require.NoError(t, err)
		return resp
	}
	valid := `{"replicas":3,"platform":{"hivelocity":{"device_type":"s1.small","region":"LAX2","selector":{"rack":"a-1","env.tier":"prod"},
		"os_name":"Ubuntu 22.04","ssh_key_name":"ops","userdata":"#cloud-config\n"}}}`
	tests := []struct {
		name  string
		spec  string
		field string // the offending field; empty: created
	}{
		{name: "valid", spec: valid},
		{name: "selector key with a colon", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2","selector":{"caphv:x":"y"}}}}`,
			field: "spec.platform.hivelocity.selector.caphv:x"},
		{name: "selector key with '='", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2","selector":{"a=b":"y"}}}}`,
			field: "spec.platform.hivelocity.selector.a=b"},
		{name: "selector value with '='", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2","selector":{"a":"b=c"}}}}`,
			field: "spec.platform.hivelocity.selector.a"},
		{name: "device type with a space", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1 small","region":"LAX2"}}}`,
			field: "spec.platform.hivelocity.device_type"},
		{name: "region with a slash", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX/2"}}}`,
			field: "spec.platform.hivelocity.region"},
		{name: "os name with a newline", spec: `{"replicas":1,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2","os_name":"Ubuntu\n22"}}}`,
			field: "spec.platform.hivelocity.os_name"},
		{name: "too many replicas", spec: `{"replicas":1001,"platform":{"hivelocity":{"device_type":"s1","region":"LAX2"}}}`,
			field: "spec.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(tt.spec)
			body := readAll(t, resp)
			if tt.field == "" {
				require.Equal(t, http.StatusCreated, resp.StatusCode, body)
				return
			}
			p := problem(t, resp, []byte(body), http.StatusBadRequest, "HYPERFLEET-VAL-002")
			require.NotNil(t, p.Errors, body)
			var fields []string
			for _, e := range *p.Errors {
				fields = append(fields, e.Field)
			}
			require.Contains(t, fields, tt.field, body)
		})
	}
}
