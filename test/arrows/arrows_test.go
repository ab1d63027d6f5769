// Package arrows checks that the imports of the house point one way: cmd → server → httpapi → resource →
// (aggregate, the condition vocabulary); postgres implements what resource declares; adapters speak only the API
// through pkg/api and pkg/adapter, never import a server package or each other; a simulator never imports the
// adapter it stands in for; nothing outside cmd imports a command. It reads `go list`, as the house's arrows
// script does, for the layout with the server under internal/.
package arrows

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/hyperfleet/hyperfleet/"

// serverPackages are the server's own packages: an adapter, or anything another module may import (pkg/), that
// imports one of them speaks to the database or the router instead of the API.
var serverPackages = []string{"server", "httpapi", "postgres", "resource", "aggregate", "auth", "schema", "jsonb",
	"kinds", "embeddeddb", "eventrelay", "feed"}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportsPointOneWay(t *testing.T) {
	server := regexp.MustCompile("^" + regexp.QuoteMeta(module) + "internal/(" + strings.Join(serverPackages, "|") + ")$")
	domainForbids := regexp.MustCompile(`^(gorm\.io/|net/http$|github\.com/jackc/|` + regexp.QuoteMeta(module) + `internal/(postgres|httpapi|server|auth|feed)$)`)
	rules := []struct {
		from      *regexp.Regexp
		forbidden func(imp string) bool
		why       string
	}{
		{regexp.MustCompile(`^internal/resource$`), domainForbids.MatchString, "the domain core knows no storage or transport"},
		{regexp.MustCompile(`^internal/aggregate$`), func(imp string) bool {
			return strings.HasPrefix(imp, module) && imp != module+"pkg/conditions"
		}, "aggregation is pure: the standard library and the condition vocabulary only"},
		{regexp.MustCompile(`^adapters/`), server.MatchString, "adapters speak only the API"},
		{regexp.MustCompile(`^pkg/`), server.MatchString, "what another module may import does not carry the server"},
		{regexp.MustCompile(`^(pkg|internal|adapters)/`), func(imp string) bool { return strings.HasPrefix(imp, module+"cmd/") },
			"nothing outside cmd imports a command"},
	}
	var wrong []string
	for _, p := range list(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, r := range rules {
			if !r.from.MatchString(rel) {
				continue
			}
			for _, imp := range p.Imports {
				if r.forbidden(imp) {
					wrong = append(wrong, rel+" → "+strings.TrimPrefix(imp, module)+": "+r.why)
				}
			}
		}
		wrong = append(wrong, adapterArrows(rel, p.Imports)...)
	}
	require.Empty(t, wrong, "imports that point the wrong way")
}

// adapterArrows returns the imports of the package rel (below adapters/) that reach another adapter, or that a
// simulator makes of the adapter it stands in for.
func adapterArrows(rel string, imports []string) []string {
	top, ok := strings.CutPrefix(rel, "adapters/")
	if !ok {
		return nil
	}
	top, sub, _ := strings.Cut(top, "/")
	var wrong []string
	for _, imp := range imports {
		other, ok := strings.CutPrefix(imp, module+"adapters/")
		if !ok {
			continue
		}
		otherTop, _, _ := strings.Cut(other, "/")
		switch {
		case otherTop != top:
			wrong = append(wrong, rel+" → adapters/"+other+": one adapter never imports another")
		case strings.HasSuffix(sub, "sim") && other == top:
			wrong = append(wrong, rel+" → adapters/"+other+": a simulator never imports the adapter it stands in for")
		}
	}
	return wrong
}

// list returns every package of the module (tests' imports included) as `go list` sees it.
func list(t *testing.T) []pkg {
	t.Helper()
	// Only a package's own imports are judged, as the house's arrows script judges them: its tests may import
	// what it may not (an adapter's integration test starts the API).
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}
