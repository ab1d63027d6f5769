// Package api holds the Go types and the typed HTTP client generated from openapi/openapi.yaml.
// Nothing here is written by hand except this file: run `make generate` after changing the document.
package api

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../openapi/openapi.yaml
