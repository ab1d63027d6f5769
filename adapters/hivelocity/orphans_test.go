package hivelocity

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// poolAnswers is hyperfleet-api as the collector sees it: the list of ids and a GET of a node pool by id answer
// from a table (an id it does not hold is a 404). It stands in for the API's one read; the integration tests use the real one.
type poolAnswers struct {
	answers map[string]error // nil: the pool exists (deleting or not)
	asked   map[string]int   // GETs by pool id
	lists   int
}

func (p *poolAnswers) IDs(context.Context, *adapter.Kind) (map[string]bool, error) {
	p.lists++
	out := map[string]bool{}
	for id, err := range p.answers {
		if err == nil {
			out[id] = true
		}
	}
	return out, nil
}

func (p *poolAnswers) Get(_ context.Context, _ *adapter.Kind, _, id string) (*adapter.Object, error) {
	p.asked[id]++
	err, ok := p.answers[id]
	if !ok {
		return nil, &adapter.APIError{Op: "get", Status: 404, Code: "HYPERFLEET-NTF-001"}
	}
	if err != nil {
		return nil, err
	}
	return &adapter.Object{ID: id}, nil
}

// The collector's decisions in a dry run, on a fake clock: which pools are orphaned (only a 404 makes one), when
// the grace period starts (when this replica first saw the 404) and ends, how often the API is asked, and that
// nothing is written to a device.
func TestOrphanCollectorDecisions(t *testing.T) {
	const (
		grace = 10 * time.Minute
		every = time.Minute
	)
	owned := func(id int32, cluster, pool string) hivelocitysim.Device {
		return hivelocitysim.Device{ID: id, LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker, OSName: "Ubuntu 22.x",
			Tags: []string{TagUseAllow, KeyCluster + "=" + cluster, KeyNodePool + "=" + pool, KeySlot + "=0"}}
	}
	sim := hivelocitysim.New(hivelocitysim.Options{APIKeys: []string{"k"}})
	require.NoError(t, sim.Seed(
		owned(1, "c1", "live"), owned(2, "c1", "deleting"), owned(3, "c1", "gone"), owned(4, "c1", "gone"),
		owned(5, "c9", "never"), owned(6, "c1", "flaky"), owned(7, "c1", "other-shard"),
		hivelocitysim.Device{ID: 8, LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker, Tags: []string{TagUseAllow}},
	))
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	key := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(key, []byte("k"), 0o600))
	client, err := hvclient.New(hvclient.Config{URL: srv.URL, APIKeyFile: key, Timeout: 5 * time.Second})
	require.NoError(t, err)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC))
	r, err := NewReconciler(client, DefaultSettings(), clk, nil)
	require.NoError(t, err)
	api := &poolAnswers{asked: map[string]int{}, answers: map[string]error{
		"live": nil, "deleting": nil, // the API answers for a deleting pool too: its own finalizer runs
		"flaky": &adapter.APIError{Op: "get", Status: 503},
	}}
	reg := prometheus.NewRegistry()
	c, err := newOrphanCollector(r, api, OrphanSettings{Grace: grace, DryRun: true, Every: every,
		Mine: func(pool string) bool { return pool != "other-shard" }}, reg)
	require.NoError(t, err)
	ctx := context.Background()

	wait := c.collect(ctx)
	require.Equal(t, 1, api.lists)
	require.Equal(t, map[string]int{"gone": 1, "never": 1, "flaky": 1}, api.asked,
		"each pool of the shard the list lacks is asked about once")
	require.ElementsMatch(t, []string{"gone", "never"}, keysOf(c.known), "only a 404 makes an orphan")
	require.Equal(t, 3.0, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices_found_total"))
	require.Equal(t, 3.0, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices"))
	require.Equal(t, every, wait, "nothing is due before the next look")

	clk.Step(every / 2)
	c.collect(ctx)
	require.Equal(t, 1, api.asked["gone"], "the API is asked at most once per interval")
	require.Equal(t, 1, api.lists)

	// The flaky pool answers 404 later: its grace starts then, not when the API first failed.
	delete(api.answers, "flaky")
	clk.Step(every / 2)
	c.collect(ctx)
	require.Contains(t, keysOf(c.known), "flaky")
	flakySince := c.known["flaky"].since
	require.Equal(t, clk.Now(), flakySince)

	clk.Step(grace - 2*every)
	c.collect(ctx)
	require.Zero(t, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices_listed_total"), "listed before the grace period ended")
	clk.Step(every)
	c.collect(ctx)
	require.Equal(t, 3.0, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices_listed_total"), "gone's two devices and never's one are past their grace")
	clk.Step(every)
	c.collect(ctx)
	require.Equal(t, 4.0, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices_listed_total"), "flaky's device too, and none twice")

	// A pool the API knows again is no orphan: its clock is forgotten.
	api.answers["gone"] = nil
	clk.Step(every)
	c.collect(ctx)
	require.NotContains(t, keysOf(c.known), "gone")
	require.Equal(t, 2.0, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices"))

	for _, req := range sim.Requests() {
		require.Contains(t, []hivelocitysim.Operation{hivelocitysim.OpListDevices}, req.Op, "a dry run did more than list: %+v", req)
	}
	require.Zero(t, gathered(t, reg, "hyperfleet_hivelocity_orphaned_devices_released_total"))
}

// gathered returns the value of the registry's series name (it has one), 0 if it has none.
func gathered(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	require.NoError(tb, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

func keysOf(m map[string]*orphan) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
