package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

func TestExactMembers(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		field string // "" when the names are exact
	}{
		{"exact", `{"adapter":"a","observed_generation":1,"observed_time":"2026-11-30T12:00:00Z","conditions":[{"type":"Available","status":"True"}],"data":{"Any":1},"metadata":null}`, ""},
		{"a time is not an object of ours", `{"observed_time":"2026-11-30T12:00:00Z","Adapter":"a"}`, "Adapter"},
		{"case-folded top level", `{"ADAPTER":"a"}`, "ADAPTER"},
		{"case-folded in a slice item", `{"conditions":[{"type":"A","status":"True"},{"type":"B","Status":"True"}]}`, "conditions[1].Status"},
		{"raw JSON keeps its own names", `{"data":{"Adapter":1,"TYPE":[{"X":1}]}}`, ""},
		{"null members", `{"conditions":null,"data":null}`, ""},
		{"the first in name order is named", `{"Zeta":1,"Alpha":2}`, "Alpha"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body reportBody
			// exactMembers runs after a successful decode; a case-folded name decodes, which is the point.
			require.NoError(t, json.Unmarshal([]byte(tt.body), &body))
			err := exactMembers(json.RawMessage(tt.body), reflect.TypeOf(&body), "")
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var e *resource.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, resource.CodeMalformed, e.Code)
			require.Equal(t, tt.field, e.Fields[0].Field)
		})
	}
}
