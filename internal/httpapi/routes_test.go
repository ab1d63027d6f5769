package httpapi_test

import (
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/httpapi"
	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The router and openapi.yaml describe the same operations: a kind (or an operation) cannot be added to one and not
// the other. Path variables are compared by position, since the router names them generically ({parent_id}, {id})
// and the document by kind ({cluster_id}, {nodepool_id}).
func TestRoutesAreTheDocumentsOperations(t *testing.T) {
	doc, err := schema.Load(openapi.Document())
	require.NoError(t, err)
	set, err := kinds.Build(doc, api.Kinds(), nil)
	require.NoError(t, err)
	srv, err := httpapi.NewHandler(httpapi.Config{}, nil, set.All, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	require.NoError(t, err)
	routes, err := srv.Routes()
	require.NoError(t, err)
	var served []string
	for _, r := range routes {
		served = append(served, r.Method+" "+anyVariable(r.Path))
	}

	spec, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	require.NoError(t, err)
	var documented []string
	for path, item := range spec.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+anyVariable(path))
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	require.Equal(t, documented, served, "the router's operations (right) and openapi.yaml's (left) differ")
	require.NotEmpty(t, served)
}

var variable = regexp.MustCompile(`\{[^}]*\}`)

func anyVariable(path string) string {
	return variable.ReplaceAllString(strings.TrimSuffix(path, "/"), "{}")
}
