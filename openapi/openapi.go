// Package openapi holds HyperFleet's OpenAPI document, openapi.yaml, the single source of truth for the API's
// paths and schemas. The document is embedded in the binary so that the server validates and serves exactly the
// document it was built from.
package openapi

import _ "embed"

//go:embed openapi.yaml
var document []byte

// Document returns the embedded OpenAPI document (YAML) as written in openapi.yaml, internal fields included.
// Each call returns a fresh copy, so callers may keep or modify it.
func Document() []byte {
	return append([]byte(nil), document...)
}
