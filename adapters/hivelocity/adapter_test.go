package hivelocity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOptionsBudget(t *testing.T) {
	tests := []struct {
		name      string
		rps       float64
		burst     int
		shards    int
		wantRPS   float64
		wantBurst int
	}{
		{name: "the defaults, one replica", rps: -1, burst: 0, shards: 1, wantRPS: 0.9, wantBurst: 10},
		{name: "the defaults, three shards share the account", rps: -1, burst: 0, shards: 3, wantRPS: 0.3, wantBurst: 3},
		{name: "an explicit rate wins, the burst is still the share", rps: 0.5, burst: 0, shards: 3, wantRPS: 0.5, wantBurst: 3},
		{name: "an explicit burst wins, the rate is still the share", rps: -1, burst: 6, shards: 3, wantRPS: 0.3, wantBurst: 6},
		{name: "an explicit 0 is no budget", rps: 0, burst: 10, shards: 3, wantRPS: 0, wantBurst: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.RPS, o.Burst = tt.rps, tt.burst
			rps, burst := o.Budget(tt.shards)
			require.InDelta(t, tt.wantRPS, rps, 1e-12)
			require.Equal(t, tt.wantBurst, burst)
		})
	}
}
