package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEveryVerbForEveryKind(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	dir := t.TempDir()
	scheduleFile := filepath.Join(dir, "schedule-spec.yaml")
	require.NoError(t, os.WriteFile(scheduleFile, []byte("timezone: Europe/Berlin\nwindows:\n  - {days: [Saturday, Sunday], start: \"02:00\", duration: 4h}\n"), 0o600))
	clusterFile := filepath.Join(dir, "demo.json")
	require.NoError(t, os.WriteFile(clusterFile, []byte(`{"kind": "Cluster", "name": "demo", "labels": {"env": "dev"}, "spec": `+clusterSpec+`}`), 0o600))

	// Each row goes through create, get by name and by id, list, patch and get again; the rows run in order,
	// as a cluster needs its stream and a node pool its cluster. Deletion follows, in reverse.
	rows := []struct {
		kind, short, name string
		create            []string
		stdin             string
		parent            []string
		row               string // the table row after create
		patch             []string
		patched           string // the table row after patch
	}{
		{
			kind: "versionstream", short: "vs", name: "stable-4-16",
			create:  []string{"--spec", `{"target_version": "4.16"}`},
			row:     `^stable-4-16\s+4\.16\s+stable-4\.16\s+False\s+Pending\s+1\s+\d+s$`,
			patch:   []string{"--spec", `{"channel_group": "fast"}`},
			patched: `^stable-4-16\s+4\.16\s+fast-4\.16\s+False\s+Pending\s+2\s+\d+s$`,
		},
		{
			kind: "upgradeschedule", short: "us", name: "weekends",
			create:  []string{"--spec-file", scheduleFile},
			row:     `^weekends\s+Europe/Berlin\s+02:00\+4h\s+Ready\s+1\s+\d+s$`,
			patch:   []string{"--spec", `timezone: UTC`},
			patched: `^weekends\s+UTC\s+02:00\+4h\s+Ready\s+2\s+\d+s$`,
		},
		{
			kind: "cluster", short: "cl", name: "demo",
			create:  []string{"--from-file", clusterFile},
			row:     `^demo\s+stable-4-16\s+<none>\s+-\s+Pending\s+1\s+\d+s$`,
			patch:   []string{"--spec", `{"upgrade_schedule": "weekends"}`, "--labels", "team=core,env-", "--if-match", "1"},
			patched: `^demo\s+stable-4-16\s+<none>\s+-\s+Pending\s+2\s+\d+s$`,
		},
		{
			kind: "nodepool", short: "np", name: "workers", parent: []string{"--cluster", "demo"},
			create:  []string{"--spec-file", "-"},
			stdin:   "replicas: 3\nplatform: {hivelocity: {device_type: s1.small, region: LAX2}}\n",
			row:     `^workers\s+demo\s+3\s+Ready\s+1\s+\d+s$`,
			patch:   []string{"--spec", `{"replicas": 5}`},
			patched: `^workers\s+demo\s+5\s+Ready\s+2\s+\d+s$`,
		},
	}
	for _, row := range rows {
		t.Run(row.kind, func(t *testing.T) {
			args := append(append([]string{"create", row.kind, row.name}, row.create...), row.parent...)
			r := c.runWith(t, testContext(t), row.stdin, args...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
			require.Equal(t, row.kind+"/"+row.name+" created\n", r.out)

			table := c.ok(t, append([]string{"get", row.kind, row.name}, row.parent...)...)
			require.Regexp(t, regexp.MustCompile(`(?m)`+row.row), table)
			id := c.idOf(t, append([]string{row.short, row.name}, row.parent...)...)
			require.Regexp(t, regexp.MustCompile(`(?m)`+row.row), c.ok(t, "get", row.short, id.String()), "by id, without --cluster")
			require.Regexp(t, regexp.MustCompile(`(?m)`+row.row), c.ok(t, "list", row.kind+"s"))
			require.Equal(t, row.kind+"/"+row.name+"\n", c.ok(t, append([]string{"get", row.kind + "/" + row.name, "-o", "name"}, row.parent...)...))

			args = append(append([]string{"patch", row.short, row.name}, row.patch...), row.parent...)
			require.Equal(t, row.kind+"/"+row.name+" patched\n", c.ok(t, args...))
			require.Regexp(t, regexp.MustCompile(`(?m)`+row.patched), c.ok(t, append([]string{"get", row.short, row.name}, row.parent...)...))
		})
	}

	t.Run("labels changed by patch", func(t *testing.T) {
		out := c.ok(t, "get", "cluster", "demo", "-o", "yaml")
		require.Contains(t, out, "team: core")
		require.NotContains(t, out, "env: dev")
		require.Contains(t, out, "upgrade_schedule: weekends")
		// The same patch again changes nothing, and says so.
		require.Equal(t, "cluster/demo patched (no change)\n", c.ok(t, "patch", "cluster", "demo", "--labels", "team=core"))
	})

	t.Run("node pools across clusters", func(t *testing.T) {
		require.Regexp(t, `(?m)^workers\s+demo\s+5\s+`, c.ok(t, "get", "nodepools"))
		require.Regexp(t, `(?m)^workers\s+demo\s+5\s+`, c.ok(t, "get", "np", "workers"), "a name unique across clusters needs no --cluster")
		require.Contains(t, c.fails(t, exitNotFound, "get", "np", "workers", "--cluster", "stable-4-16"), `cluster "stable-4-16" not found`)
	})

	t.Run("delete", func(t *testing.T) {
		// A node pool requires no adapter: it goes at once.
		require.Equal(t, "nodepool/workers marked for deletion\n", c.ok(t, "delete", "np", "workers", "--cluster", "demo"))
		require.Contains(t, c.fails(t, exitNotFound, "get", "np", "workers", "--cluster", "demo"), `nodepool "workers" not found`)
		// The schedule is named by the cluster: the API refuses, and the CLI shows why.
		require.Contains(t, c.fails(t, exitConflict, "delete", "us", "weekends"), "HYPERFLEET-CNF-005 (409 Conflict)")
		// A cluster waits for its adapter to finalize it: Deleting, out of lists, still shown by name.
		require.Equal(t, "cluster/demo marked for deletion\n", c.ok(t, "delete", "cluster", "demo"))
		require.Regexp(t, `(?m)^demo\s+stable-4-16\s+<none>\s+-\s+Deleting\s+3\s+`, c.ok(t, "get", "cluster", "demo"))
		r := c.run(t, "list", "clusters")
		require.Equal(t, exitOK, r.code)
		require.Empty(t, r.out)
		require.Equal(t, "No clusters found.\n", r.err)
		require.Contains(t, c.ok(t, "list", "clusters", "--include-deleted"), "Deleting")
		// Nothing live names the schedule or the stream any more.
		require.Equal(t, "upgradeschedule/weekends marked for deletion\n", c.ok(t, "delete", "upgradeschedule", "weekends"))
		require.Equal(t, "versionstream/stable-4-16 marked for deletion\n", c.ok(t, "delete", "vs", "stable-4-16"))
		require.Regexp(t, `(?m)^stable-4-16\s+.*\sDeleting\s+3\s+`, c.ok(t, "get", "vs", "stable-4-16"))
		// An admin's force-delete removes a resource at once.
		require.Contains(t, c.fails(t, exitUsage, "delete", "cluster", "demo", "--force"), "add --yes", "no terminal to ask on")
		require.Equal(t, "cluster/demo force-deleted\n", c.ok(t, "delete", "cluster", "demo", "--force", "--yes"))
		require.Contains(t, c.fails(t, exitNotFound, "get", "cluster", "demo"), `cluster "demo" not found`)
	})
}
