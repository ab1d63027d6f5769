package adapter

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/shard"
)

func TestShardLeaseConfig(t *testing.T) {
	tests := []struct {
		name    string
		tune    func(c *Config)
		wantErr string
	}{
		{name: "leases with virtual shards", tune: func(c *Config) { c.ShardLeases, c.ShardCount = true, 16 }},
		{name: "leases with one shard: active and standby", tune: func(c *Config) { c.ShardLeases = true }},
		{name: "a fixed index beside leases", tune: func(c *Config) { c.ShardLeases, c.ShardCount, c.ShardIndex = true, 4, 1 },
			wantErr: "--shard-index does not go with --shard-leases"},
		{name: "a TTL under a second", tune: func(c *Config) { c.ShardLeases, c.ShardLeaseTTL = true, 500*time.Millisecond },
			wantErr: "--shard-lease-ttl"},
		{name: "NATS", tune: func(c *Config) { c.ShardLeases, c.Source, c.NATSURL = true, SourceNATS, "nats://127.0.0.1:4222" },
			wantErr: "not nats"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults("test-adapter", "127.0.0.1:0")
			tt.tune(&c)
			err := c.Check()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// A replica holds its leases until two thirds of a TTL after the start of its last successful renewal, and a lost
// lease ends the reconciles running under it.
func TestShardLeaseStopsAtTheRenewDeadline(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	cfg := Defaults("test-adapter", "127.0.0.1:0")
	cfg.ShardLeases, cfg.ShardCount, cfg.ShardLeaseTTL, cfg.Replica = true, 4, 15*time.Second, "r0"
	r := &Runner{cfg: cfg, clock: clk, log: slog.New(slog.NewTextHandler(io.Discard, nil)), queue: newWorkQueue(newJitteredBackoff(time.Millisecond, time.Second, nil), clk)}
	r.leases = newShardLeaser(r)
	id := "0195b3c4-6f1e-7c2a-9d3e-5a1b2c3d4e5f"
	s := ShardOf(id, 4)
	require.False(t, r.owns(id), "nothing is held before the first grant")

	sent := clk.Now()
	r.leases.apply(context.Background(), &api.ShardLeaseGrant{ShardCount: 4, Leases: []api.ShardLease{{Shard: s, Generation: 7}}}, sent)
	require.True(t, r.owns(id))
	ctx, end, lease, held := r.leaseWork(context.Background(), id)
	defer end()
	require.True(t, held)
	metadata := map[string]any{"shard_index": 0, "shard_count": 4}
	lease.stamp(metadata)
	require.Equal(t, map[string]any{shard.MetadataShard: s, shard.MetadataShardCount: 4, shard.MetadataLeaseGeneration: int64(7)}, metadata)

	clk.Step(10*time.Second - time.Millisecond)
	require.True(t, r.owns(id), "still inside the renew deadline")
	clk.Step(time.Millisecond)
	require.False(t, r.owns(id), "the renew deadline passed: no new work")

	// The next grant no longer has the shard: the reconcile running under it is told to stop.
	r.leases.apply(context.Background(), &api.ShardLeaseGrant{ShardCount: 4}, clk.Now())
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the reconcile's context did not end when its lease was lost")
	}
}
