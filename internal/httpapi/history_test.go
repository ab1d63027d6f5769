package httpapi

import (
	"reflect"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/openapi"
)

// The history's answer structs have exactly the members their schemas declare (as TestWireStructsMatchTheDocument
// checks the others').
func TestHistoryWireStructsMatchTheDocument(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	require.NoError(t, err)
	for schema, wire := range map[string]any{
		"HistoryEntry":  historyEntryJSON{},
		"HistoryReport": historyReportJSON{},
		"HistoryList":   historyListJSON{},
	} {
		t.Run(schema, func(t *testing.T) {
			ref := doc.Components.Schemas[schema]
			require.NotNil(t, ref, "openapi.yaml has no schema %s", schema)
			require.Equal(t, properties(ref.Value), jsonMembers(reflect.TypeOf(wire)))
		})
	}
}
