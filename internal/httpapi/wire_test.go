package httpapi

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/openapi"
)

// The request bodies are decoded into hand-written structs rather than the generated types, because these keep
// data, metadata and spec as raw JSON for storage (BenchmarkDecodeStatusReport: the generated report type costs
// about 50 % more time and 2.6 times the allocations on the status write). This test keeps them honest: each struct
// has exactly the members its schema in openapi.yaml declares. Answers are checked against the document by the
// integration tests' contract transport.
func TestWireStructsMatchTheDocument(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	require.NoError(t, err)
	tests := []struct {
		schema string
		wire   any
	}{
		{"AdapterStatusReport", reportBody{}},
		{"ReportedCondition", reportedCondition{}},
		{"ResourcePatch", patchBody{}},
		{"ClusterCreate", createBody{}},
		{"NodePoolCreate", createBody{}},
		{"VersionStreamCreate", createBody{}},
		{"UpgradeScheduleCreate", createBody{}},
		{"AdapterStatus", statusJSONOut{}},
		{"ResourceStatus", statusJSON{}},
		{"ObjectReference", ownerJSON{}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			ref := doc.Components.Schemas[tt.schema]
			require.NotNil(t, ref, "openapi.yaml has no schema %s", tt.schema)
			require.Equal(t, properties(ref.Value), jsonMembers(reflect.TypeOf(tt.wire)))
		})
	}
}

// properties returns the member names a schema declares, following allOf.
func properties(s *openapi3.Schema) []string {
	var out []string
	for name := range s.Properties {
		out = append(out, name)
	}
	for _, part := range s.AllOf {
		out = append(out, properties(part.Value)...)
	}
	sort.Strings(out)
	return out
}

func jsonMembers(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
