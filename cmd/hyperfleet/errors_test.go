package main

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestErrorsAreShownReadably(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	c.ok(t, "create", "cluster", "demo", "--spec", clusterSpec)

	tests := []struct {
		name string
		args []string
		code int
		want []string // lines of stderr, in order
	}{
		{"a bad name", []string{"create", "cluster", "Bad_Name", "--spec", clusterSpec}, exitError,
			[]string{"error: HYPERFLEET-VAL-002 (400 Bad Request): ", "  name: "}},
		{"a name taken", []string{"create", "cluster", "demo", "--spec", clusterSpec}, exitConflict,
			[]string{"error: HYPERFLEET-CNF-001 (409 Conflict): "}},
		{"a stream no one has", []string{"create", "cluster", "other", "--spec", `{"version_stream": "nope"}`}, exitError,
			[]string{"error: HYPERFLEET-VAL-006 (422 Unprocessable Entity): "}},
		{"another generation", []string{"patch", "cluster", "demo", "--labels", "a=b", "--if-match", "7"}, exitConflict,
			[]string{"error: HYPERFLEET-CNF-004 (412 Precondition Failed): the Cluster has changed since version \"7\": it is at \"1\"; read it again"}},
		{"a bad search", []string{"get", "clusters", "--search", "colour = 'red'"}, exitError,
			[]string{"error: HYPERFLEET-VAL-003 (400 Bad Request): "}},
		{"an unknown spec member", []string{"patch", "cluster", "demo", "--spec", `{"colour": "red"}`}, exitError,
			[]string{"error: HYPERFLEET-VAL-00"}},
		{"no such resource", []string{"get", "cluster", "nope"}, exitNotFound, []string{`error: cluster "nope" not found`}},
		{"no such node pool", []string{"patch", "np", "nope", "--cluster", "demo", "--spec", "{}"}, exitNotFound,
			[]string{`error: nodepool "nope" not found in cluster "demo"`}},
		{"an unknown kind", []string{"get", "frobs"}, exitUsage,
			[]string{`error: unknown kind "frobs": want clusters (cl), nodepools (np; children of a cluster: --cluster), versionstreams (vs), upgradeschedules (us)`, "Run 'hyperfleet get --help' for usage."}},
		{"a name to list", []string{"list", "cluster/demo"}, exitUsage, []string{"error: list takes a kind only"}},
		{"an unknown command", []string{"frobnicate"}, exitUsage, []string{`error: unknown command "frobnicate" for "hyperfleet"`}},
		{"an unknown flag", []string{"get", "clusters", "--frob"}, exitUsage, []string{"error: unknown flag: --frob"}},
		{"an unknown format", []string{"get", "clusters", "-o", "xml"}, exitUsage, []string{`error: invalid argument "xml" for "-o, --output" flag: want one of table, wide, json, yaml, name, jsonpath=…, go-template=…, custom-columns=…`}},
		{"a missing argument", []string{"delete", "cluster"}, exitUsage, []string{"error: requires at least 2 arg(s), only received 1"}},
		{"no spec", []string{"create", "cluster", "x"}, exitUsage, []string{"error: one of --spec, --spec-file, --from-file is needed"}},
		{"two specs", []string{"create", "cluster", "x", "--spec", "{}", "--spec-file", "f"}, exitUsage, []string{"error: --spec and --spec-file: give one"}},
		{"nothing to patch", []string{"patch", "cluster", "demo"}, exitUsage, []string{"error: nothing to change"}},
		{"nothing to apply", []string{"apply"}, exitUsage, []string{"error: -f FILE is needed"}},
		{"a bad selector", []string{"get", "clusters", "-l", "env in dev"}, exitUsage, []string{`error: --selector "env in dev": `}},
		{"a selector the search cannot state", []string{"get", "clusters", "-l", "!env"}, exitUsage, []string{`error: --selector "!env": the API's search cannot select by !`}},
		{"a bad template", []string{"get", "clusters", "-o", "jsonpath={.items["}, exitUsage, []string{`error: -o jsonpath={.items[: `}},
		{"--cluster on a root kind", []string{"get", "clusters", "--cluster", "demo"}, exitUsage, []string{"error: --cluster applies to node pools only"}},
		{"a node pool without its cluster", []string{"create", "np", "pool", "--spec", nodePoolSpec}, exitUsage, []string{"error: the command line: a nodepool needs its cluster: --cluster"}},
		{"a spec that is not an object", []string{"create", "vs", "x", "--spec", "[1]"}, exitUsage, []string{"error: --spec: want a JSON or YAML object"}},
		{"a bad label", []string{"patch", "cluster", "demo", "--labels", "=x"}, exitUsage, []string{`error: --labels "=x": want key=value or key- (to remove it)`}},
		{"a bad server", []string{"get", "clusters", "--server", "ftp://x"}, exitUsage, []string{`error: server "ftp://x" is not an http(s) URL`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run(t, tc.args...)
			require.Equal(t, tc.code, r.code, "stderr: %s", r.err)
			require.Empty(t, r.out)
			rest := r.err
			for _, want := range tc.want {
				i := strings.Index(rest, want)
				require.GreaterOrEqual(t, i, 0, "stderr %q lacks %q", r.err, want)
				rest = rest[i+len(want):]
			}
			require.NotContains(t, r.err, "goroutine", "never a stack trace")
		})
	}
}

func TestAnAPIThatIsNotThere(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there any more
	c := &cli{env: map[string]string{"HYPERFLEET_SERVER": addr, "XDG_CONFIG_HOME": t.TempDir()}, kinds: api.Kinds()}
	errOut := c.fails(t, exitError, "get", "clusters")
	require.Contains(t, errOut, "error: cannot reach the HyperFleet API at http://"+addr+": ")
	require.Contains(t, errOut, "--server or HYPERFLEET_SERVER")
	require.Equal(t, "Client: hyperfleet dev (build unknown)\n", c.ok(t, "version", "--client"))
}
