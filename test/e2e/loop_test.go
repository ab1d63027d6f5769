package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// TestWholeLoop brings the system up as `make run` does, walks through the README (a cluster with a 3-node pool
// going Ready, a new patch rolling inside its schedule and held by a blackout, scaling, deletion releasing the
// devices), then kills the API and each adapter with SIGKILL in the middle of a cluster's creation and checks that
// the loop still converges with no device claimed twice, no HostedCluster duplicated and no report lost; finally it
// stops everything as Ctrl-C does. Times are logged, never asserted.
func TestWholeLoop(t *testing.T) {
	s := startSystem(t)
	t.Logf("MEASURE all components ready %s after hyperfleet-dev up started (fresh dev dir, kube assets built)", s.ready.Round(100*time.Millisecond))
	walked := t.Run("walkthrough", func(t *testing.T) { walkthrough(t, s) })
	killed := t.Run("kills", func(t *testing.T) { killsMidFlow(t, s) })
	if !walked || !killed {
		return
	}
	pids := map[string]int{}
	for _, name := range []string{"hyperfleet-api", "kube-mc-a", "kube-mc-b", versionresolver.Name, hostedcluster.Name, hivelocity.Name, placer} {
		pids[name] = s.component(t, name).PID
	}
	took := s.stop(t)
	t.Logf("MEASURE everything stopped %s after SIGINT", took.Round(100*time.Millisecond))
	for name, pid := range pids {
		require.False(t, processRuns(pid), "%s (pid %d) still runs after up stopped", name, pid)
	}
	require.Contains(t, s.output.String(), "all stopped in")
}

// placer is the cluster placer's adapter name (adapters/placement).
const placer = "cluster-placer"

const (
	clusterSpec = `{"version_stream": "stable-4-16", "upgrade_schedule": "anytime", "hosted_cluster": {"dns": {"base_domain": "example.com"}}}`
	poolSpec    = `{"replicas": 3, "platform": {"hivelocity": {"device_type": "hvWorker", "region": "LAX2", "ssh_key_name": "hyperfleet-dev"}}}`
)

// walkthrough runs the README's walk-through with the CLI.
func walkthrough(t *testing.T, s *system) {
	server := "http://" + s.addrs.api
	require.Contains(t, s.cli(t, "login", "--server", server, "--token-file", s.devDir+"/user.token"), "Logged in")
	require.Contains(t, s.cli(t, "get", "versionstreams"), "stable-4-16")
	require.Contains(t, s.cli(t, "get", "upgradeschedules"), "anytime")

	created := time.Now()
	phases := s.recordPhases(t, "demo")
	s.cli(t, "create", "cluster", "demo", "--spec", clusterSpec)
	s.cli(t, "create", "nodepool", "workers", "--cluster", "demo", "--spec", poolSpec)
	s.cli(t, "wait", "cluster", "demo", "--for=phase=Ready", "--timeout", "5m")
	s.cli(t, "wait", "nodepool", "workers", "--cluster", "demo", "--for=phase=Ready", "--timeout", "5m")
	t.Logf("MEASURE walk-through: cluster demo with a 3-node pool Ready %s after its create", time.Since(created).Round(100*time.Millisecond))
	seen := phases()
	require.Equal(t, "Ready", seen[len(seen)-1], "phases %v", seen)
	require.True(t, inOrder(seen, "Pending", "Progressing", "Ready"), "cluster phases %v go Pending → Progressing → Ready", seen)
	require.Contains(t, s.cli(t, "get", "clusters"), "Ready")
	cluster, pool, stream := s.ids(t, "demo", "workers", "stable-4-16")
	s.checkLoop(t, stream, cluster, pool)

	// Placement: the first cluster goes to mc-a (both are empty; ties go by name), which then cannot be deleted.
	mcs := s.cli(t, "get", "managementclusters")
	require.Regexp(t, `(?m)^mc-a\s`, mcs)
	require.Regexp(t, `(?m)^mc-b\s`, mcs)
	require.Regexp(t, `(?m)^demo\s.*\smc-a\s`, s.cli(t, "get", "clusters", "-o", "wide"), "MANAGEMENT CLUSTER")
	_, errOut, err := s.run(t, filepath.Join(s.bin, "hyperfleet"), "delete", "managementcluster", "mc-a")
	require.Error(t, err, "deleting a management cluster a cluster is placed on")
	require.Contains(t, errOut, "HYPERFLEET-CNF-005")
	require.Len(t, owned(s.devices(t), pool.String()), 3)

	// A new patch rolls at once: the schedule is open all week.
	published := time.Now()
	first := strings.TrimSpace(s.dev(t, "publish", "4.16", "--cincinnati-url", "http://"+s.addrs.cincinnati))
	require.Equal(t, "4.16.3", first)
	s.waitFor(t, 2*time.Minute, "the cluster to roll to "+first, func() bool { return s.applierData(t, cluster)["current_version"] == first })
	t.Logf("MEASURE walk-through: %s rolled %s after it was published", first, time.Since(published).Round(100*time.Millisecond))

	// A blackout closes the schedule: the next patch waits, and rolls once the blackout is lifted.
	s.cli(t, "patch", "upgradeschedule", "anytime", "--spec",
		`{"blackouts": [{"start": "2000-01-01T00:00:00Z", "end": "2100-01-01T00:00:00Z", "reason": "freeze"}]}`)
	second := strings.TrimSpace(s.dev(t, "publish", "4.16", "--cincinnati-url", "http://"+s.addrs.cincinnati))
	require.Equal(t, "4.16.4", second)
	s.waitFor(t, 2*time.Minute, "the stream to resolve "+second, func() bool { return s.resolvedVersion(t, stream) == second })
	s.waitFor(t, time.Minute, "the upgrade to be held", func() bool { return s.applierCondition(t, cluster, "UpgradePending") == "True/OutsideUpgradeWindow" })
	require.Equal(t, first, s.applierData(t, cluster)["current_version"])
	s.cli(t, "patch", "upgradeschedule", "anytime", "--spec", `{"blackouts": null}`)
	s.waitFor(t, 2*time.Minute, "the cluster to roll to "+second, func() bool { return s.applierData(t, cluster)["current_version"] == second })

	scaled := time.Now()
	s.cli(t, "patch", "nodepool", "workers", "--cluster", "demo", "--spec", `{"replicas": 4}`)
	s.cli(t, "wait", "nodepool", "workers", "--cluster", "demo", "--for=phase=Ready", "--timeout", "5m")
	t.Logf("MEASURE walk-through: pool scaled 3 → 4 Ready %s after the patch", time.Since(scaled).Round(100*time.Millisecond))
	s.checkLoop(t, stream, cluster, pool)
	s.checkHostedClusters(t, cluster)

	deleted := time.Now()
	s.cli(t, "delete", "cluster", "demo", "--wait")
	t.Logf("MEASURE walk-through: cluster deleted (devices released, HostedCluster gone) %s after the delete", time.Since(deleted).Round(100*time.Millisecond))
	require.Empty(t, owned(s.devices(t), pool.String()), "devices still in the deleted pool")
	for _, d := range s.devices(t) {
		for _, tag := range d.Tags {
			require.False(t, strings.HasPrefix(tag, hivelocity.TagPrefix), "device %d keeps %s", d.ID, tag)
		}
	}
	s.checkHostedClusters(t)
	s.checkDevicesExactlyOnce(t)
}

// killsMidFlow creates a cluster with a 3-node pool on a stream of its own, once with nothing killed and then once
// per victim killed with SIGKILL at a point where it has work in flight, and checks each converges.
func killsMidFlow(t *testing.T, s *system) {
	// Devices of a region of their own, so that these pools never meet the walk-through's.
	var spares []hivelocitysim.Device
	for i := range int32(18) { // three for each of the six pools below
		spares = append(spares, hivelocitysim.Device{ID: 9001 + i, LocationName: "E2E1", ProductID: hivelocitysim.DemoProductWorker,
			OSName: "Ubuntu 20.x", Tags: []string{hivelocitysim.TagUseAllow, hivelocitysim.TagDeviceTypePrefix + hivelocitysim.DemoTypeWorker}})
	}
	body, err := json.Marshal(spares)
	require.NoError(t, err)
	resp, err := http.Post("http://"+s.addrs.hivelocity+"/_sim/devices", "application/json", bytes.NewReader(body)) //nolint:noctx // loopback
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	type loop struct{ stream, cluster, pool uuid.UUID }
	var loops []loop
	scenarios := []struct {
		victim string
		// when says when the victim has work in flight; nil kills it right after the stream is created.
		when func(t *testing.T, l loop) bool
	}{
		{"", nil},
		{"hyperfleet-api", func(t *testing.T, l loop) bool { return len(owned(s.devices(t), l.pool.String())) > 0 }},
		{versionresolver.Name, nil},
		// The cluster waits for the restarted placer, which rebuilds its ledger from its reports before placing it.
		{placer, nil},
		{hostedcluster.Name, func(t *testing.T, l loop) bool { return slices.Contains(s.hostedClusters(t), l.cluster.String()) }},
		{hivelocity.Name, func(t *testing.T, l loop) bool {
			return slices.ContainsFunc(owned(s.devices(t), l.pool.String()), func(d hivelocitysim.DeviceState) bool { return d.IsReload })
		}},
	}
	for i, sc := range scenarios {
		name := "nothing"
		if sc.victim != "" {
			name = sc.victim
		}
		t.Run("kill "+name, func(t *testing.T) {
			streamName, clusterName := fmt.Sprintf("kill-%d", i), fmt.Sprintf("kill-%d", i)
			begin := time.Now()
			s.cli(t, "create", "versionstream", streamName, "--spec", `{"target_version": "4.17"}`)
			restarts := -1
			if sc.victim != "" && sc.when == nil {
				restarts = s.kill(t, sc.victim)
			}
			s.cli(t, "create", "cluster", clusterName, "--spec", fmt.Sprintf(`{"version_stream": %q, "hosted_cluster": {"dns": {"base_domain": "example.com"}}}`, streamName))
			s.cli(t, "create", "nodepool", "workers", "--cluster", clusterName, "--spec",
				`{"replicas": 3, "platform": {"hivelocity": {"device_type": "hvWorker", "region": "E2E1", "ssh_key_name": "hyperfleet-dev"}}}`)
			cluster, pool, stream := s.ids(t, clusterName, "workers", streamName)
			l := loop{stream, cluster, pool}
			loops = append(loops, l)
			if sc.when != nil {
				s.waitFor(t, 3*time.Minute, sc.victim+" to have work in flight", func() bool { return sc.when(t, l) })
				restarts = s.kill(t, sc.victim)
			}
			s.cli(t, "wait", "cluster", clusterName, "--for=phase=Ready", "--timeout", "5m")
			s.cli(t, "wait", "nodepool", "workers", "--cluster", clusterName, "--for=phase=Ready", "--timeout", "5m")
			t.Logf("MEASURE kill %s: cluster with a 3-node pool (and a new stream) Ready %s after the stream's create",
				name, time.Since(begin).Round(100*time.Millisecond))
			if sc.victim != "" {
				s.waitFor(t, time.Minute, sc.victim+" to be restarted", func() bool {
					c := s.component(t, sc.victim)
					return c.Restarts == restarts+1 && c.Ready
				})
			}
			s.checkLoop(t, stream, cluster, pool)
			var live []uuid.UUID
			for _, l := range loops {
				live = append(live, l.cluster)
			}
			s.checkHostedClusters(t, live...)
			s.checkDevicesExactlyOnce(t)
		})
	}

	// Everything still converged after all the kills, and the pools release their devices when deleted.
	for _, l := range loops {
		s.checkLoop(t, l.stream, l.cluster, l.pool)
	}
	for _, l := range loops {
		s.cli(t, "delete", "cluster", l.cluster.String())
	}
	c := s.client(t)
	for _, l := range loops {
		s.waitFor(t, 5*time.Minute, "cluster "+l.cluster.String()+" to be gone", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := c.GetClusterWithResponse(ctx, l.cluster)
			return err == nil && resp.StatusCode() == http.StatusNotFound
		})
		require.Empty(t, owned(s.devices(t), l.pool.String()))
	}
	s.checkHostedClusters(t)
	s.checkDevicesExactlyOnce(t)
}

// ids returns the ids of a cluster, its pool and a stream.
func (s *system) ids(t *testing.T, cluster, pool, stream string) (clusterID, poolID, streamID uuid.UUID) {
	t.Helper()
	get := func(args ...string) uuid.UUID {
		var obj struct {
			ID uuid.UUID `json:"id"`
		}
		require.NoError(t, json.Unmarshal([]byte(s.cli(t, append([]string{"get"}, append(args, "-o", "json")...)...)), &obj))
		return obj.ID
	}
	return get("cluster", cluster), get("nodepool", pool, "--cluster", cluster), get("versionstream", stream)
}

// recordPhases follows a cluster's phase from now on (it may not exist yet) and returns a function that stops and
// returns the distinct phases seen, in order.
func (s *system) recordPhases(t *testing.T, name string) func() []string {
	t.Helper()
	c := s.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		search := "name = '" + name + "'"
		for ctx.Err() == nil {
			resp, err := c.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: &search})
			if err == nil && resp.JSON200 != nil && len(resp.JSON200.Items) == 1 {
				phase := string(resp.JSON200.Items[0].Status.Phase)
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != phase {
					seen = append(seen, phase)
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// inOrder reports whether seen lists only phases of want, in want's order.
func inOrder(seen []string, want ...string) bool {
	at := 0
	for _, p := range seen {
		i := slices.Index(want, p)
		if i < at {
			return false
		}
		at = i
	}
	return true
}

// applierReport returns the applier's latest report about a cluster.
func (s *system) applierReport(t *testing.T, cluster uuid.UUID) *api.AdapterStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.client(t).ListClusterStatusesWithResponse(ctx, cluster)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "%s", resp.Body)
	for _, r := range resp.JSON200.Items {
		if r.Adapter == hostedcluster.Name {
			return &r
		}
	}
	return nil
}

func (s *system) applierData(t *testing.T, cluster uuid.UUID) map[string]any {
	t.Helper()
	if r := s.applierReport(t, cluster); r != nil {
		return r.Data
	}
	return nil
}

// applierCondition returns "Status/Reason" of a condition of the applier's report.
func (s *system) applierCondition(t *testing.T, cluster uuid.UUID, typ string) string {
	t.Helper()
	r := s.applierReport(t, cluster)
	if r == nil {
		return ""
	}
	for _, c := range r.Conditions {
		if c.Type == typ {
			reason := ""
			if c.Reason != nil {
				reason = *c.Reason
			}
			return string(c.Status) + "/" + reason
		}
	}
	return ""
}

// resolvedVersion returns the version the resolver reports for a stream.
func (s *system) resolvedVersion(t *testing.T, stream uuid.UUID) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.client(t).ListVersionStreamStatusesWithResponse(ctx, stream)
	require.NoError(t, err)
	for _, r := range resp.JSON200.Items {
		if r.Adapter == versionresolver.Name {
			v, _ := r.Data["resolved_version"].(string)
			return v
		}
	}
	return ""
}
