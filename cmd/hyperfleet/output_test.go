package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	for i, env := range []string{"dev", "dev", "prod"} {
		c.ok(t, "create", "cluster", fmt.Sprintf("c%d-%s", i, env), "--spec", clusterSpec, "--labels", "env="+env)
	}
	c.ok(t, "create", "np", "pool-a", "--cluster", "c0-dev", "--spec", nodePoolSpec)

	t.Run("table", func(t *testing.T) {
		out := c.ok(t, "get", "clusters")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 4)
		require.Regexp(t, `^NAME\s+VERSION STREAM\s+VERSION\s+HELD\s+PHASE\s+GENERATION\s+AGE$`, lines[0])
		for i, env := range []string{"dev", "dev", "prod"} {
			require.Regexp(t, fmt.Sprintf(`^c%d-%s\s+stable-4-16\s+<none>\s+-\s+Pending\s+1\s+\d+s$`, i, env), lines[i+1])
		}
		// Columns line up: every row's PHASE starts where the header's does.
		at := strings.Index(lines[0], "PHASE")
		for _, l := range lines[1:] {
			require.Equal(t, "Pending", l[at:at+7])
		}
		require.Regexp(t, `^NAME\s+CLUSTER\s+REPLICAS\s+PHASE\s+GENERATION\s+AGE\npool-a\s+c0-dev\s+3\s+Ready\s+1\s+\d+s\n$`, c.ok(t, "get", "np"))
		require.Regexp(t, `^NAME\s+TARGET\s+CHANNEL\s+RESOLVED\s+PHASE\s+GENERATION\s+AGE\n`, c.ok(t, "get", "vs"))
		require.Regexp(t, `^c2-prod\s+stable-4-16\s+<none>\s+-\s+Pending\s+1\s+\d+s\n$`, c.ok(t, "get", "cl", "c2-prod", "--no-headers"))
	})

	t.Run("wide", func(t *testing.T) {
		out := c.ok(t, "get", "cluster", "c0-dev", "-o", "wide")
		require.Regexp(t, `^NAME\s+VERSION STREAM\s+SCHEDULE\s+PAUSED\s+MANAGEMENT CLUSTER\s+TENANT\s+VERSION\s+TARGET\s+HELD\s+PHASE\s+GENERATION\s+AGE\s+ID\s+CONDITIONS\n`, out)
		require.Regexp(t, `(?m)^c0-dev\s+stable-4-16\s+<none>\s+<none>\s+<none>\s+default\s+<none>\s+<none>\s+-\s+Pending\s+1\s+\d+s\s+[0-9a-f-]{36}\s+Ready=False\(AdaptersMissing\),Available=False\(AdaptersMissing\),ApplierAvailable=Unknown\(NotReported\)$`, out)
	})

	t.Run("json", func(t *testing.T) {
		var one api.Cluster
		require.NoError(t, json.Unmarshal([]byte(c.ok(t, "get", "cluster", "c1-dev", "-o", "json")), &one))
		require.Equal(t, "c1-dev", one.Name)
		require.Equal(t, "dev", one.Labels["env"])
		require.Equal(t, "stable-4-16", one.Spec.VersionStream)

		var list api.ClusterList
		require.NoError(t, json.Unmarshal([]byte(c.ok(t, "list", "clusters", "-o", "json", "--size", "2")), &list))
		require.Equal(t, "ClusterList", list.Kind)
		require.NotNil(t, list.Total, "total is counted unless count=false")
		require.Equal(t, int64(3), *list.Total)
		require.Equal(t, 2, list.Size)
		require.Len(t, list.Items, 2)

		var named api.ClusterList
		require.NoError(t, json.Unmarshal([]byte(c.ok(t, "get", "clusters", "c0-dev", "c2-prod", "-o", "json")), &named))
		require.Len(t, named.Items, 2, "several names make a list")
	})

	t.Run("yaml", func(t *testing.T) {
		var one api.NodePool
		require.NoError(t, yaml.Unmarshal([]byte(c.ok(t, "get", "nodepool", "pool-a", "--cluster", "c0-dev", "-o", "yaml")), &one))
		require.Equal(t, "pool-a", one.Name)
		require.Equal(t, 3, one.Spec.Replicas)
		require.Equal(t, "NodePool", one.Kind)
	})

	t.Run("name", func(t *testing.T) {
		require.Equal(t, "cluster/c0-dev\ncluster/c1-dev\ncluster/c2-prod\n", c.ok(t, "get", "clusters", "-o", "name"))
	})

	t.Run("selection", func(t *testing.T) {
		tests := []struct {
			args []string
			want string
		}{
			{[]string{"-l", "env=dev"}, "cluster/c0-dev\ncluster/c1-dev\n"},
			{[]string{"--selector", "env!=dev"}, "cluster/c2-prod\n"},
			{[]string{"--search", "name like 'c1%'"}, "cluster/c1-dev\n"},
			{[]string{"-l", "env=dev", "--search", "name != 'c0-dev'"}, "cluster/c1-dev\n"},
			{[]string{"--order", "name desc"}, "cluster/c2-prod\ncluster/c1-dev\ncluster/c0-dev\n"},
			{[]string{"--size", "1", "--page", "2"}, "cluster/c1-dev\n"},
			{[]string{"--size", "1", "--all"}, "cluster/c0-dev\ncluster/c1-dev\ncluster/c2-prod\n"},
		}
		for _, tc := range tests {
			t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
				require.Equal(t, tc.want, c.ok(t, append([]string{"list", "clusters", "-o", "name"}, tc.args...)...))
			})
		}
		r := c.run(t, "get", "clusters", "--size", "2")
		require.Equal(t, "Showing 2 of 3 clusters: --page 2 or --all for more.\n", r.err)
		require.Equal(t, exitUsage, c.run(t, "get", "clusters", "--all", "--page", "2").code)
	})

	t.Run("missing names", func(t *testing.T) {
		r := c.run(t, "get", "clusters", "c0-dev", "nope")
		require.Equal(t, exitNotFound, r.code)
		require.Regexp(t, regexp.MustCompile(`(?m)^c0-dev\s`), r.out, "what exists is shown")
		require.Equal(t, "error: cluster \"nope\" not found\n", r.err)
	})
}
