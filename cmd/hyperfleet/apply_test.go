package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const fleetYAML = `# a stream, a schedule, a cluster on both and a pool in it
kind: versionstream
name: stable-4-16
spec: {target_version: "4.16"}
---
kind: UpgradeSchedule
name: weekends
spec:
  timezone: Europe/Berlin
  windows: [{days: [Saturday, Sunday], start: "02:00", duration: 4h}]
---
kind: cl
name: demo
labels: {env: dev}
spec:
  version_stream: stable-4-16
  upgrade_schedule: weekends
  hosted_cluster: {dns: {base_domain: example.com}}
---
kind: nodepools
name: workers
cluster: demo
spec: {replicas: 3, platform: {hivelocity: {device_type: s1.small, region: LAX2}}}
---
`

func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fleetYAML), 0o600))

	steps := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"first apply creates", []string{"apply", "-f", file}, "",
			"versionstream/stable-4-16 created\nupgradeschedule/weekends created\ncluster/demo created\nnodepool/workers created\n"},
		{"second apply changes nothing", []string{"apply", "-f", file}, "",
			"versionstream/stable-4-16 unchanged\nupgradeschedule/weekends unchanged\ncluster/demo unchanged\nnodepool/workers unchanged\n"},
		{"a changed document is patched", []string{"apply", "-f", "-"},
			strings.Replace(fleetYAML, "replicas: 3", "replicas: 4", 1),
			"versionstream/stable-4-16 unchanged\nupgradeschedule/weekends unchanged\ncluster/demo unchanged\nnodepool/workers configured\n"},
		// The document is the whole desired spec: a member it leaves out is removed, not kept as a merge would.
		{"a member the file leaves out goes", []string{"apply", "-f", "-"},
			"kind: cluster\nname: demo\nspec: {version_stream: stable-4-16, hosted_cluster: {dns: {base_domain: example.com}}}\n",
			"cluster/demo configured\n"},
		{"labels given are the labels", []string{"apply", "-f", "-", "-o", "name"},
			"kind: cluster\nname: demo\nlabels: {team: core}\n", "cluster/demo\n"},
		{"JSON documents too, --cluster for a pool without one", []string{"apply", "-f", "-", "--cluster", "demo"},
			`{"kind": "np", "name": "spares", "spec": {"replicas": 1, "platform": {"hivelocity": {"device_type": "s1.small", "region": "LAX2"}}}}`,
			"nodepool/spares created\n"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			r := c.runWith(t, testContext(t), step.stdin, step.args...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
			require.Equal(t, step.want, r.out)
		})
	}

	t.Run("what get prints applies back unchanged", func(t *testing.T) {
		for _, args := range [][]string{{"cluster", "demo"}, {"np", "workers", "--cluster", "demo"}, {"vs", "stable-4-16"}} {
			yaml := c.ok(t, append([]string{"get"}, append(args, "-o", "yaml")...)...)
			r := c.runWith(t, testContext(t), yaml, "apply", "-f", "-")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
			require.Contains(t, r.out, " unchanged\n")
		}
		edited := strings.Replace(c.ok(t, "get", "np", "workers", "--cluster", "demo", "-o", "yaml"), "replicas: 4", "replicas: 6", 1)
		require.Equal(t, "nodepool/workers configured\n", c.runWith(t, testContext(t), edited, "apply", "-f", "-").out)
	})

	t.Run("state after applies", func(t *testing.T) {
		labels := c.ok(t, "get", "cluster", "demo", "-o", "yaml")
		require.Contains(t, labels, "team: core")
		require.NotContains(t, labels, "env: dev")
		require.NotContains(t, labels, "upgrade_schedule", "left out of the file, so removed")
		require.Regexp(t, `(?m)^workers\s+demo\s+6\s+Ready\s+3\s+`, c.ok(t, "get", "np", "--cluster", "demo"))
	})

	t.Run("a bad document does not stop the others", func(t *testing.T) {
		r := c.runWith(t, testContext(t), "kind: cluster\nname: Bad_Name\nspec: {version_stream: stable-4-16}\n---\nkind: vs\nname: fast-4-17\nspec: {target_version: \"4.17\"}\n",
			"apply", "-f", "-")
		require.Equal(t, exitError, r.code)
		require.Equal(t, "versionstream/fast-4-17 created\n", r.out)
		require.Contains(t, r.err, "error: stdin, document 1: HYPERFLEET-VAL-002 (400 Bad Request)")
		require.Contains(t, r.err, "error: 1 of 2 documents not applied")
	})

	t.Run("documents the CLI cannot read", func(t *testing.T) {
		for _, doc := range []string{"kind: cluster\nname: x\nmetadata: {}\n", "kind: frob\nname: x\nspec: {}\n", "name: x\n", "kind: np\nname: abc\nspec: {replicas: 1}\n"} {
			r := c.runWith(t, testContext(t), doc, "apply", "-f", "-")
			require.NotEqual(t, exitOK, r.code, "document %q", doc)
			require.Contains(t, r.err, "error: ")
		}
	})
}
