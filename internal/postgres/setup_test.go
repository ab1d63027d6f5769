package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// kindsRequiring returns the API's kinds as main builds them, with required adapters per kind name.
func kindsRequiring(tb testing.TB, required map[string][]string) *kinds.Set {
	tb.Helper()
	doc, err := schema.Load(openapi.Document())
	require.NoError(tb, err)
	set, err := kinds.Build(doc, api.Kinds(), required)
	require.NoError(tb, err)
	return set
}
