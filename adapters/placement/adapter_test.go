package placement

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

func TestNewRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name string
		edit func(*adapter.Config, *Options)
		want string
	}{
		{"two shards", func(c *adapter.Config, _ *Options) { c.ShardCount = 2 }, "--shard-count 2"},
		{"free control planes", func(_ *adapter.Config, o *Options) { o.ControlPlaneMemoryGiB = 0 }, "--control-plane-memory-gib"},
		{"no retry", func(_ *adapter.Config, o *Options) { o.RetryInterval = 0 }, "--retry-interval"},
		{"no finalize interval", func(_ *adapter.Config, o *Options) { o.FinalizeInterval = -1 }, "--finalize-interval"},
		{"bad applier", func(_ *adapter.Config, o *Options) { o.Applier = "" }, "--applier-adapter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, o := adapter.Defaults(Name, "127.0.0.1:0"), DefaultOptions()
			tt.edit(&rt, &o)
			_, err := New(rt, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestPlacedMetric(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(5), nil, true)
	f.addMC(t, "mc-b", mcWithRoom(5), nil, true)
	r := newReconciler(f)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(newPlacedCollector(r)))
	gauges := func() map[string]float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, mf := range mfs {
			require.Equal(t, "hyperfleet_placer_placed_clusters", mf.GetName())
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	require.Empty(t, gauges(), "nothing before the ledger is built")

	for _, id := range []string{"c1", "c2", "c3"} {
		reconcile(t, r, f, f.addCluster(t, id, nil))
	}
	require.Equal(t, map[string]float64{"mc-a": 2, "mc-b": 1}, gauges())
}
