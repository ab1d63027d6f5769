package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// hyperfleet api makes raw calls with the CLI's server and token, prints JSON answers indented, shows errors as the
// other commands do and exits with the documented codes.
func TestAPICommand(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	stream := filepath.Join(t.TempDir(), "stream.json")
	require.NoError(t, os.WriteFile(stream, []byte(`{"name": "from-file", "spec": {"target_version": "4.16"}}`), 0o600))

	var created api.Resource
	require.NoError(t, json.Unmarshal([]byte(c.ok(t, "api", "POST", "/versionstreams", "--data", "@"+stream)), &created))
	require.Equal(t, "from-file", created.Name)
	r := c.runWith(t, testContext(t), `{"name": "from-stdin", "spec": {"target_version": "4.17"}}`, "api", "post", "versionstreams", "--data", "-")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.err)

	var list api.ResourceList
	out := c.ok(t, "api", "GET", "/versionstreams?search=name='from-file'")
	require.Contains(t, out, "\n  \"items\": [", "indented")
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Items, 1)

	patched := c.ok(t, "api", "PATCH", "/versionstreams/"+created.Id.String(), "-d", `{"labels": {"team": "core"}}`)
	require.Contains(t, patched, `"team": "core"`, "a PATCH is a merge patch")
	require.Contains(t, c.ok(t, "api", "GET", "/openapi"), "openapi: 3.0.3", "an answer that is not JSON is printed as it came")

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"not found", []string{"api", "GET", "/versionstreams/" + uuid.NewString()}, exitNotFound, "error: HYPERFLEET-NTF-"},
		{"a conflict", []string{"api", "POST", "/versionstreams", "-d", `{"name": "from-file", "spec": {"target_version": "4.16"}}`}, exitConflict,
			"error: HYPERFLEET-CNF-001 (409 Conflict)"},
		{"invalid", []string{"api", "POST", "/versionstreams", "-d", `{"name": "x", "spec": {}}`}, exitError, "  spec.target_version: "},
		{"a bad method", []string{"api", "FROB", "/versionstreams"}, exitUsage, `error: method "FROB"`},
		{"data that is not JSON", []string{"api", "POST", "/versionstreams", "-d", "name=x"}, exitUsage, "error: --data is not JSON"},
		{"a bad header", []string{"api", "GET", "/versionstreams", "-H", "nocolon"}, exitUsage, `error: -H "nocolon"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, c.fails(t, tc.code, tc.args...), tc.want)
		})
	}
}
