package schema_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/schema"
)

// syntheticDocument marks properties internal in every place the public document handles.
const syntheticDocument = `openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /things:
    post:
      requestBody:
        content:
          application/json:
            schema:
              type: object
              required: [a, hidden]
              properties:
                a: {type: string}
                hidden: {type: string, x-hyperfleet-internal: true}
      responses:
        '200': {description: ok}
components:
  schemas:
    Thing:
      type: object
      additionalProperties: false
      required: [secret]
      properties:
        name: {type: string, x-hyperfleet-internal: false}
        secret: {$ref: '#/components/schemas/Secret', x-hyperfleet-internal: true}
        nested:
          type: object
          properties:
            deep: {type: integer, x-hyperfleet-internal: true}
            shallow: {type: integer}
        list:
          type: array
          items:
            allOf:
              - type: object
                properties:
                  inner: {type: string, x-hyperfleet-internal: true}
    Secret: {type: string}
`

func TestLoadSynthetic(t *testing.T) {
	doc, err := schema.Load([]byte(syntheticDocument))
	require.NoError(t, err)

	thing := loadSpec(t, doc, "Thing")
	require.Equal(t,
		[]string{"list[0].inner", "list[1].inner", "nested.deep", "secret"},
		thing.InternalFields(decode(t, `{"name": "n", "secret": "s", "nested": {"deep": 1, "shallow": 2},
			"list": [{"inner": "x"}, {"inner": null}, {}]}`)))

	yamlDoc, _, err := doc.Public()
	require.NoError(t, err)
	require.NotContains(t, string(yamlDoc), schema.InternalExtension)
	for _, gone := range []string{"secret:", "deep:", "inner:", "hidden"} {
		require.NotContains(t, string(yamlDoc), gone)
	}
	require.NotContains(t, string(yamlDoc), "required: [secret]", "an emptied required list goes")
	require.Contains(t, string(yamlDoc), "required: [a]\n")
	require.Contains(t, string(yamlDoc), "shallow:")
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{name: "not YAML", raw: "{{{", wantErr: "parsing"},
		{name: "not OpenAPI 3.0", raw: strings.Replace(syntheticDocument, "3.0.3", "3.1.0", 1), wantErr: "only 3.0.x"},
		{
			name:    "invalid document",
			raw:     strings.Replace(syntheticDocument, "Secret: {type: string}", "Secret: {type: string, description: a, b}", 1),
			wantErr: "invalid OpenAPI document",
		},
		{
			name:    "marker not a boolean",
			raw:     strings.Replace(syntheticDocument, "x-hyperfleet-internal: false", "x-hyperfleet-internal: 'no'", 1),
			wantErr: "components.schemas.Thing.properties.name",
		},
		{
			name:    "marker on a schema rather than a property",
			raw:     strings.Replace(syntheticDocument, "Secret: {type: string}", "Secret: {type: string, x-hyperfleet-internal: true}", 1),
			wantErr: "components.schemas.Secret.x-hyperfleet-internal",
		},
		{
			name: "public document invalid",
			raw: strings.Replace(syntheticDocument, "    Secret: {type: string}",
				"    Secret: {type: string}\n    Leaky:\n      type: object\n      additionalProperties: false\n"+
					"      default: {hush: x}\n      properties:\n        hush: {type: string, x-hyperfleet-internal: true}", 1),
			wantErr: "public document is invalid",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schema.Load([]byte(tt.raw))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
