package resource

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const leaseTTL = 10 * time.Second

// leases builds a state of count shards at testNow: holders[i] holds shard i ("" free), live when its lease ends
// after testNow (expired lists the shards whose lease has ended); the generations are 1…count.
func leaseState(count int, holders []string, expired ...int) *ShardLeaseState {
	st := &ShardLeaseState{Now: testNow, ShardCount: count}
	members := map[string]time.Time{}
	for i := range count {
		l := ShardLease{Shard: i, Generation: int64(i + 1)}
		if i < len(holders) && holders[i] != "" {
			l.Holder, l.ExpiresTime = holders[i], testNow.Add(5*time.Second)
			for _, e := range expired {
				if e == i {
					l.ExpiresTime = testNow.Add(-time.Second)
				}
			}
			if l.ExpiresTime.After(members[l.Holder]) {
				members[l.Holder] = l.ExpiresTime
			}
		}
		st.Leases = append(st.Leases, l)
	}
	for m, exp := range members {
		st.Members = append(st.Members, ShardMember{Replica: m, ExpiresTime: exp})
	}
	return st
}

func heldShards(g *ShardLeaseGrant) map[int]int64 {
	out := map[int]int64{}
	for _, l := range g.Leases {
		out[l.Shard] = l.Generation
	}
	return out
}

func TestShardLeasePlan(t *testing.T) {
	tests := []struct {
		name     string
		st       *ShardLeaseState
		req      ShardLeaseRequest
		wantHeld map[int]int64
		wantLost []int
		wantLive int
		// wantFreed are shards the request gave back (free, at a new generation).
		wantFreed []int
		wantCode  Code
	}{
		{
			name:     "the first replica of a new adapter takes every shard, each at a new generation",
			st:       leaseState(4, nil),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 4},
			wantHeld: map[int]int64{0: 5, 1: 6, 2: 7, 3: 8}, wantLive: 1,
		},
		{
			name:     "a renewal keeps the generations",
			st:       leaseState(4, []string{"a", "a", "b", "b"}),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 4, Held: []HeldShard{{0, 1}, {1, 2}}},
			wantHeld: map[int]int64{0: 1, 1: 2}, wantLive: 2,
		},
		{
			name:     "a newcomer finds nothing free and waits for the others to give back",
			st:       leaseState(4, []string{"a", "a", "a", "a"}),
			req:      ShardLeaseRequest{Replica: "b", ShardCount: 4},
			wantHeld: map[int]int64{}, wantLive: 2,
		},
		{
			name:     "a holder above the floor gives back its highest shards while another is short",
			st:       func() *ShardLeaseState { s := leaseState(4, []string{"a", "a", "a", "a"}); return withMember(s, "b") }(),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 4, Held: []HeldShard{{0, 1}, {1, 2}, {2, 3}, {3, 4}}},
			wantHeld: map[int]int64{0: 1, 1: 2}, wantLost: []int{2, 3}, wantLive: 2, wantFreed: []int{2, 3},
		},
		{
			name:     "16 shards, a fifth replica: the others give back down to the floor of 3",
			st:       withMember(leaseState(16, []string{"a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "c", "c", "d", "d", "d", "d"}), "e"),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 16, Held: []HeldShard{{0, 1}, {1, 2}, {2, 3}, {3, 4}}},
			wantHeld: map[int]int64{0: 1, 1: 2, 2: 3}, wantLost: []int{3}, wantLive: 5, wantFreed: []int{3},
		},
		{
			name:     "16 shards, 5 replicas, nobody short: a holder of the ceiling keeps it",
			st:       leaseState(16, []string{"a", "a", "a", "a", "b", "b", "b", "c", "c", "c", "d", "d", "d", "e", "e", "e"}),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 16},
			wantHeld: map[int]int64{0: 1, 1: 2, 2: 3, 3: 4}, wantLive: 5,
		},
		{
			name:     "a frozen replica's expired shards go to the live ones",
			st:       leaseState(4, []string{"a", "a", "b", "b"}, 0, 1),
			req:      ShardLeaseRequest{Replica: "b", ShardCount: 4, Held: []HeldShard{{2, 3}, {3, 4}}},
			wantHeld: map[int]int64{0: 5, 1: 6, 2: 3, 3: 4}, wantLive: 1,
		},
		{
			name:     "a lease taken over since is answered lost",
			st:       leaseState(4, []string{"b", "a", "b", "b"}),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 4, Held: []HeldShard{{0, 1}, {1, 2}}},
			wantHeld: map[int]int64{1: 2}, wantLost: []int{0}, wantLive: 2,
		},
		{
			name:     "an own lease that expired unnoticed by others is renewed at its generation",
			st:       leaseState(2, []string{"a", "a"}, 0, 1),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 2, Held: []HeldShard{{0, 1}, {1, 2}}},
			wantHeld: map[int]int64{0: 1, 1: 2}, wantLive: 1,
		},
		{
			name:     "a release gives every lease back at new generations",
			st:       leaseState(4, []string{"a", "a", "b", "b"}),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 4, Release: true, Held: []HeldShard{{0, 1}, {1, 2}}},
			wantHeld: map[int]int64{}, wantLost: []int{0, 1}, wantLive: 1, wantFreed: []int{0, 1},
		},
		{
			name:     "another shard count while a replica holds a live lease is refused",
			st:       leaseState(4, []string{"b"}),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 8},
			wantCode: CodeUnprocessable,
		},
		{
			name:     "another shard count once every lease has expired starts over above the old generations",
			st:       leaseState(4, []string{"b"}, 0),
			req:      ShardLeaseRequest{Replica: "a", ShardCount: 2},
			wantHeld: map[int]int64{0: 7, 1: 8}, wantLive: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Adapter, tt.req.TTL = "test-adapter", leaseTTL
			changes, grant, err := planShardLeases(tt.st, tt.req)
			if tt.wantCode != "" {
				require.Equal(t, tt.wantCode, ErrorCode(err), "error: %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantHeld, heldShards(grant))
			require.Equal(t, append([]int{}, tt.wantLost...), grant.Lost)
			require.Equal(t, tt.wantLive, grant.LiveReplicas)
			for _, l := range grant.Leases {
				require.Equal(t, testNow.Add(leaseTTL), l.ExpiresTime, "shard %d is renewed for a TTL", l.Shard)
			}
			var freed []int
			for _, l := range changes.Leases {
				if l.Holder == "" && l.Shard < tt.st.ShardCount && tt.st.Leases[l.Shard].Holder != "" {
					freed = append(freed, l.Shard)
					require.Greater(t, l.Generation, tt.st.Leases[l.Shard].Generation, "giving back takes a new generation")
				}
			}
			require.Equal(t, tt.wantFreed, freed)
			require.Equal(t, tt.req.Release, changes.Leave)
		})
	}
}

// withMember adds a live member that holds nothing.
func withMember(st *ShardLeaseState, replica string) *ShardLeaseState {
	st.Members = append(st.Members, ShardMember{Replica: replica, ExpiresTime: testNow.Add(5 * time.Second)})
	return st
}

// TestShardLeasePlanConverges plays replicas asking in turn, as their renewals do, for every small fleet: each time
// the set of replicas changes (one joins, one leaves) the shards settle within a few rounds on every live replica
// holding between floor and ceil of its share, every shard held, and never a generation reused.
func TestShardLeasePlanConverges(t *testing.T) {
	for shards := 1; shards <= 20; shards++ {
		for replicas := 1; replicas <= 6; replicas++ {
			t.Run(fmt.Sprintf("%d shards, %d then %d then %d replicas", shards, replicas, replicas+2, max(replicas-1, 1)), func(t *testing.T) {
				st := &ShardLeaseState{Now: testNow}
				seen := map[int64]bool{}
				apply := func(replica string, release bool) {
					req := ShardLeaseRequest{Adapter: "a", Replica: replica, ShardCount: shards, TTL: leaseTTL, Release: release}
					changes, _, err := planShardLeases(st, req)
					require.NoError(t, err)
					st.ShardCount = shards
					if len(st.Leases) != shards {
						st.Leases = make([]ShardLease, shards)
					}
					for _, l := range changes.Leases {
						if l.Generation != st.Leases[l.Shard].Generation || st.Leases[l.Shard].Holder != l.Holder {
							require.False(t, seen[l.Generation], "generation %d reused", l.Generation)
							seen[l.Generation] = true
						}
						st.Leases[l.Shard] = l
					}
					var members []ShardMember
					for _, m := range st.Members {
						if m.Replica != replica {
							members = append(members, m)
						}
					}
					if !release {
						members = append(members, changes.Member)
					}
					st.Members = members
				}
				settle := func(live []string) {
					for range 4 * len(live) {
						for _, r := range live {
							apply(r, false)
						}
					}
					n := len(live)
					count := map[string]int{}
					for _, l := range st.Leases {
						require.Contains(t, live, l.Holder, "shard %d is held by a live replica", l.Shard)
						count[l.Holder]++
					}
					for _, r := range live {
						require.GreaterOrEqual(t, count[r], shards/n, "replica %s", r)
						require.LessOrEqual(t, count[r], (shards+n-1)/n, "replica %s", r)
					}
				}
				names := func(n int) []string {
					out := make([]string, n)
					for i := range out {
						out[i] = fmt.Sprintf("r%d", i)
					}
					return out
				}
				settle(names(replicas))
				settle(names(replicas + 2))
				for _, r := range names(replicas + 2)[max(replicas-1, 1):] {
					apply(r, true)
				}
				settle(names(max(replicas-1, 1)))
			})
		}
	}
}
