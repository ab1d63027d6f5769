package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestStatusesAndWait(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	c.seedStream(t, "stable-4-16")
	c.ok(t, "create", "cluster", "demo", "--spec", clusterSpec)
	id := c.idOf(t, "cluster", "demo")

	t.Run("no report yet", func(t *testing.T) {
		r := c.run(t, "statuses", "cluster", "demo")
		require.Equal(t, exitOK, r.code)
		require.Equal(t, "No adapter has reported about cluster/demo yet.\n", r.err)
	})

	t.Run("wait for Ready", func(t *testing.T) {
		w := c.start(t, "wait", "cluster", "demo", "--for=phase=Ready", "--interval", "20ms", "--timeout", "1m")
		w.eventually(t, "the progress line shows the phase", func(_, errOut string) bool {
			return regexp.MustCompile(`waiting for cluster/demo to reach phase=Ready \(\d+s\): phase Pending; not True yet: Ready \(AdaptersMissing\)`).MatchString(errOut)
		})
		s.report(t, "clusters", id, applier, 1, cond(conditions.Available, conditions.False, "Provisioning"), cond(conditions.Health, conditions.True, ""))
		w.eventually(t, "a new line when the phase changes", func(_, errOut string) bool {
			return strings.Contains(errOut, "phase Progressing; not True yet: Ready (AdaptersNotReady)")
		})
		s.report(t, "clusters", id, applier, 1, cond(conditions.Available, conditions.True, "AsExpected"))
		r := w.finish(t)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
		require.Equal(t, "cluster/demo condition met\n", r.out)
		// Not a terminal: one line per change, never the same twice in a row.
		lines := strings.Split(strings.TrimSpace(r.err), "\n")
		for i := 1; i < len(lines); i++ {
			require.NotEqual(t, stripElapsed(lines[i-1]), stripElapsed(lines[i]))
		}
	})

	t.Run("already met", func(t *testing.T) {
		require.Equal(t, "cluster/demo condition met\n", c.ok(t, "wait", "cl", "demo", "--for", "condition=Available"))
		require.Equal(t, "cluster/demo condition met\n", c.ok(t, "wait", "cl", "demo", "--for", "condition=Ready=true"))
	})

	t.Run("statuses", func(t *testing.T) {
		out := c.ok(t, "statuses", "cluster", "demo")
		require.Regexp(t, `^ADAPTER\s+GENERATION\s+AVAILABLE\s+REASON\s+AGE\napplier\s+1\s+True\s+AsExpected\s+\d+s\n$`, out)
		require.Regexp(t, `(?m)^applier\s+1\s+True\s+AsExpected\s+\d+s\s+<none>\s+<none>$`, c.ok(t, "statuses", "cluster", "demo", "-o", "wide"))
		var list api.AdapterStatusList
		require.NoError(t, json.Unmarshal([]byte(c.ok(t, "statuses", "cluster", "demo", "-o", "json")), &list))
		require.Len(t, list.Items, 1)
		require.Equal(t, applier, list.Items[0].Adapter)
		require.NoError(t, yaml.Unmarshal([]byte(c.ok(t, "statuses", "cluster", "demo", "-o", "yaml")), &list))
		require.Equal(t, "AdapterStatusList", list.Kind)
		// A new generation leaves the report behind, and the table says so.
		c.ok(t, "patch", "cluster", "demo", "--spec", `{"hosted_cluster": {"ssh_public_key": "ssh-ed25519 AAAA demo"}}`)
		require.Regexp(t, `(?m)^applier\s+1 \(of 2\)\s+True\s+AsExpected\s+`, c.ok(t, "statuses", "cluster", "demo"))
	})

	t.Run("wait times out", func(t *testing.T) {
		// Nothing has reported at generation 2, which the patch above made.
		r := c.run(t, "wait", "cluster", "demo", "--for=phase=Ready", "--timeout", "200ms", "--interval", "20ms")
		require.Equal(t, exitError, r.code)
		require.Contains(t, r.err, "error: timed out after 200ms waiting for cluster/demo to reach phase=Ready: phase Pending; not True yet: Ready (AdaptersNotReady)\n")
	})

	t.Run("delete --wait", func(t *testing.T) {
		w := c.start(t, "delete", "cluster", "demo", "--wait", "--interval", "20ms")
		w.eventually(t, "the cluster is being deleted", func(_, errOut string) bool {
			return regexp.MustCompile(`waiting for cluster/demo to reach deletion \(\d+s\): phase Deleting`).MatchString(errOut)
		})
		s.report(t, "clusters", id, applier, 3, cond(conditions.Available, conditions.False, "Deleted"), cond(conditions.Finalized, conditions.True, ""))
		r := w.finish(t)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
		require.Equal(t, "cluster/demo deleted\n", r.out)

		// Waiting for a deletion that already happened is met at once (a script run again), not "not found".
		require.Equal(t, "cluster/demo deleted\n", c.ok(t, "wait", "cluster", "demo", "--for=delete"))
		require.Contains(t, c.fails(t, exitNotFound, "wait", "cluster", "demo", "--for=phase=Ready"), "not found")
	})

	t.Run("usage", func(t *testing.T) {
		for _, forArg := range []string{"phase=Done", "condition=", "condition=Ready=Maybe", "deleted", "delete=now"} {
			require.Contains(t, c.fails(t, exitUsage, "wait", "vs", "stable-4-16", "--for", forArg), "--for="+forArg)
		}
	})
}

// stripElapsed drops the "(3s)" of a progress line.
func stripElapsed(line string) string {
	return regexp.MustCompile(` \(\d+(s|m\d*s?)\):`).ReplaceAllString(line, ":")
}
