package httpapi

import (
	"fmt"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// What a caller may store must be bounded field by field, or one user can make every list of a kind cost the
// server (and every client) megabytes per item. Every schema a request body reaches has to bound itself: strings
// by length (or an enum or format), arrays by item count, maps by property count, and free-form JSON by bytes,
// which the x-hyperfleet-max-bytes extension states and the server enforces with the constant it names here.
func TestEveryRequestFieldIsBounded(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	require.NoError(t, err)

	maxBytes := map[string]int{
		"AdapterStatusReport.data":     conditions.MaxDataBytes,
		"AdapterStatusReport.metadata": conditions.MaxMetadataBytes,
		"ResourcePatch.spec":           resource.MaxSpecBytes,
	}
	var unbounded []string
	seenBytes := map[string]bool{}
	visited := map[*openapi3.Schema]bool{}
	var walk func(path string, s *openapi3.Schema)
	walk = func(path string, s *openapi3.Schema) {
		if s == nil || visited[s] {
			return
		}
		visited[s] = true
		if n, ok := s.Extensions["x-hyperfleet-max-bytes"]; ok {
			seenBytes[path] = true
			want, known := maxBytes[path]
			switch {
			case !known:
				unbounded = append(unbounded, path+": x-hyperfleet-max-bytes without a server limit named in this test")
			case fmt.Sprint(n) != fmt.Sprint(want):
				unbounded = append(unbounded, fmt.Sprintf("%s: document says %v bytes, the server enforces %d", path, n, want))
			}
			return
		}
		for i, sub := range s.AllOf {
			walk(fmt.Sprintf("%s.allOf[%d]", path, i), sub.Value)
		}
		switch {
		case s.Type.Is("string"):
			if s.MaxLength == nil && len(s.Enum) == 0 && s.Format != "uuid" && s.Format != "date-time" {
				unbounded = append(unbounded, path+": string without maxLength")
			}
		case s.Type.Is("array"):
			if s.MaxItems == nil {
				unbounded = append(unbounded, path+": array without maxItems")
			}
			walk(path+"[]", s.Items.Value)
		case s.Type.Is("object"):
			if s.AdditionalProperties.Schema != nil || (s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has) {
				if s.MaxProps == nil {
					unbounded = append(unbounded, path+": map without maxProperties")
				}
				if s.AdditionalProperties.Schema != nil {
					walk(path+".*", s.AdditionalProperties.Schema.Value)
				}
			}
			names := make([]string, 0, len(s.Properties))
			for name := range s.Properties {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				walk(path+"."+name, s.Properties[name].Value)
			}
		}
	}

	bodies := 0
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			for _, media := range op.RequestBody.Value.Content {
				ref := media.Schema.Ref
				name := ref[len("#/components/schemas/"):]
				bodies++
				walk(name, media.Schema.Value)
			}
		}
	}
	require.Greater(t, bodies, 8, "the walk must reach the request bodies")
	for path := range maxBytes {
		require.Truef(t, seenBytes[path], "%s: the document must state its byte limit (x-hyperfleet-max-bytes)", path)
	}
	sort.Strings(unbounded)
	require.Empty(t, unbounded, "request fields a caller could make arbitrarily large")
}
