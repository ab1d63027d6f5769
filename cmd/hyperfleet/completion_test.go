package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompletion(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	for _, name := range []string{"demo", "dev-east", "prod"} {
		c.ok(t, "create", "cluster", name, "--spec", clusterSpec)
	}
	c.ok(t, "create", "np", "workers", "--cluster", "demo", "--spec", nodePoolSpec)

	t.Run("scripts", func(t *testing.T) {
		for shell, want := range map[string]string{
			"bash": "__start_hyperfleet", "zsh": "#compdef hyperfleet", "fish": "complete -c hyperfleet", "powershell": "Register-ArgumentCompleter",
		} {
			require.Contains(t, c.ok(t, "completion", shell), want, shell)
		}
	})

	t.Run("dynamic", func(t *testing.T) {
		tests := []struct {
			args []string
			want []string
		}{
			{[]string{"get", ""}, []string{"clusters\tCluster (cl)", "managementclusters\tManagementCluster (mc)", "nodepools\tNodePool (np)", "upgradeschedules\tUpgradeSchedule (us)", "versionstreams\tVersionStream (vs)"}},
			{[]string{"wait", "n"}, []string{"nodepools\tNodePool (np)"}},
			{[]string{"get", "clusters", ""}, []string{"demo", "dev-east", "prod"}},
			{[]string{"delete", "cl", "de"}, []string{"demo", "dev-east"}},
			{[]string{"get", "np", "--cluster", "d"}, []string{"demo", "dev-east"}},
			{[]string{"get", "np", "--cluster", "demo", ""}, []string{"workers"}},
			{[]string{"statuses", "vs", ""}, []string{"stable-4-16"}},
			{[]string{"rollout", ""}, []string{"pause\tStop new upgrade starts on a stream (spec.rollout.paused: true)",
				"resume\tLet a stream's rollout continue where it stopped, also after it paused itself",
				"status\tShow a stream's rollout: its release, each stage's progress and the failed clusters"}},
			{[]string{"rollout", "status", "st"}, []string{"stable-4-16"}},
			{[]string{"rollout", "resume", "stable-4-16", ""}, nil},
			{[]string{"rollout", "status", "stable-4-16", "-o", ""}, []string{"table", "json", "yaml"}},
			{[]string{"get", "clusters", "-o", ""}, []string{"table", "wide", "json", "yaml", "name", "jsonpath=…", "go-template=…", "custom-columns=…"}},
			{[]string{"get", "clusters", "x_%"}, nil},
		}
		for _, tc := range tests {
			t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
				out := c.ok(t, append([]string{"__complete"}, tc.args...)...)
				lines := strings.Split(strings.TrimSpace(out), "\n")
				got := lines[:len(lines)-1] // the last line is cobra's directive
				if tc.want == nil {
					require.Empty(t, got)
					return
				}
				require.Equal(t, tc.want, got)
			})
		}
	})
}

func TestVersion(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	require.Equal(t, "Client: hyperfleet dev (build unknown)\nServer: hyperfleet-api test (build test-build) at "+s.url+"\n", c.ok(t, "version"))
	require.Equal(t, "hyperfleet dev\n", c.ok(t, "--version"))
	require.Contains(t, c.ok(t), "Resource commands:", "no command shows help")
}
