package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/shard"
)

// Bounds of a shard lease request.
const (
	// MaxShardCount is the most virtual shards an adapter's fleet may be split into.
	MaxShardCount = 1024
	// MinShardLeaseTTL and MaxShardLeaseTTL bound a lease's time to live: below a second a renewal could not
	// arrive in time; above ten minutes a lost replica's shards would wait too long.
	MinShardLeaseTTL = time.Second
	MaxShardLeaseTTL = 10 * time.Minute
	// MaxReplicaLength bounds a replica's name (a pod name is at most 253 bytes).
	MaxReplicaLength = 253
)

// HeldShard is a lease a replica believes it holds: the shard and the generation it was granted.
type HeldShard struct {
	Shard      int
	Generation int64
}

// ShardLeaseRequest is one replica's call: who it is, how many shards its adapter's fleet is split into, how long
// its leases live after this call, and what it believes it holds. Release gives every lease back and leaves the
// replicas that share the shards (a replica stopping).
type ShardLeaseRequest struct {
	Adapter    string
	Replica    string
	ShardCount int
	TTL        time.Duration
	Held       []HeldShard
	Release    bool
}

// ShardLease is one shard of an adapter as stored: its holder ("" when free), the fencing generation (it grows on
// every change of holder) and when the holder's lease ends unless renewed (zero when free).
type ShardLease struct {
	Shard       int
	Holder      string
	Generation  int64
	ExpiresTime time.Time
}

// ShardMember is a replica that asked for leases lately; it shares the shards until ExpiresTime.
type ShardMember struct {
	Replica     string
	ExpiresTime time.Time
}

// ShardLeaseState is an adapter's leases and members as locked by a transaction, with the database's clock.
type ShardLeaseState struct {
	Now time.Time
	// ShardCount is the stored leases' shard count; 0 when the adapter has none yet.
	ShardCount int
	Leases     []ShardLease // by shard
	Members    []ShardMember
}

// ShardLeaseGrant is the answer to a ShardLeaseRequest: the leases the replica holds now, with their generations.
type ShardLeaseGrant struct {
	Adapter    string
	Replica    string
	ShardCount int
	TTL        time.Duration
	// Leases are the replica's, by shard; each ends at its ExpiresTime unless renewed.
	Leases []ShardLease
	// Lost are the shards of the request's Held that the replica no longer holds at the generation it named.
	Lost []int
	// LiveReplicas is how many replicas share the shards, this one included (unless it released).
	LiveReplicas int
	// FairShare is the most shards one replica takes: ceil(ShardCount / LiveReplicas).
	FairShare int
	// Now is the database's clock when the grant was made.
	Now time.Time
}

// ShardLeaseChanges are what a ShardLeaseRequest writes: the leases that changed (every shard, after a change of
// the shard count) and the replica's membership (Leave removes it).
type ShardLeaseChanges struct {
	ShardCount int
	Leases     []ShardLease
	Member     ShardMember
	Leave      bool
}

// ShardLeaseStore keeps the adapters' shard leases.
type ShardLeaseStore interface {
	// UpdateShardLeases runs, in one transaction, plan on adapter's leases and members locked for update (the
	// leases of a new adapter are created first, count of them, free) and writes the changes it returns unless it
	// fails. The transaction commits before UpdateShardLeases returns.
	UpdateShardLeases(ctx context.Context, adapter string, count int, plan func(st *ShardLeaseState) (ShardLeaseChanges, error)) error
	// ShardLeases returns adapter's leases and members as they are (none for an adapter that never asked).
	ShardLeases(ctx context.Context, adapter string) (*ShardLeaseState, error)
}

// ShardLeases hands out adapters' virtual shards to their replicas, each shard to one replica at a time.
type ShardLeases struct {
	store ShardLeaseStore
}

// NewShardLeases returns the shard lease service over store.
func NewShardLeases(store ShardLeaseStore) *ShardLeases { return &ShardLeases{store: store} }

// Acquire renews the replica's leases, takes free or expired shards up to its fair share, gives back those above
// it while another replica is short, and returns what it holds; all in one transaction under the adapter's lease
// rows' locks. Errors: CodeInvalid for a malformed request; CodeUnprocessable for a shard count other than the one
// live replicas hold leases under (every replica of an adapter must use the same).
func (s *ShardLeases) Acquire(ctx context.Context, req ShardLeaseRequest) (*ShardLeaseGrant, error) {
	if err := checkShardLeaseRequest(&req); err != nil {
		return nil, err
	}
	var grant *ShardLeaseGrant
	err := s.store.UpdateShardLeases(ctx, req.Adapter, req.ShardCount, func(st *ShardLeaseState) (ShardLeaseChanges, error) {
		changes, g, err := planShardLeases(st, req)
		grant = g
		return changes, err
	})
	if err != nil {
		return nil, err
	}
	return grant, nil
}

// List returns adapter's leases, by shard, with the database's clock: a lease whose ExpiresTime is not after Now
// is free to take. CodeInvalid for a malformed adapter name.
func (s *ShardLeases) List(ctx context.Context, adapter string) (*ShardLeaseState, error) {
	if !conditions.ValidAdapterName(adapter) {
		return nil, &Error{Code: CodeInvalid, Message: "the adapter name is not valid",
			Fields: []FieldError{{Field: "adapter", Message: fmt.Sprintf("must be a DNS label of at most %d characters", conditions.MaxAdapterName)}}}
	}
	return s.store.ShardLeases(ctx, adapter)
}

func checkShardLeaseRequest(req *ShardLeaseRequest) error {
	var fields []FieldError
	if !conditions.ValidAdapterName(req.Adapter) {
		fields = append(fields, FieldError{Field: "adapter", Message: fmt.Sprintf("must be a DNS label of at most %d characters", conditions.MaxAdapterName)})
	}
	if req.Replica == "" || len(req.Replica) > MaxReplicaLength {
		fields = append(fields, FieldError{Field: "replica", Message: fmt.Sprintf("must be 1 to %d bytes", MaxReplicaLength)})
	}
	if req.ShardCount < 1 || req.ShardCount > MaxShardCount {
		fields = append(fields, FieldError{Field: "shard_count", Message: fmt.Sprintf("must be 1 to %d", MaxShardCount)})
	}
	if req.TTL < MinShardLeaseTTL || req.TTL > MaxShardLeaseTTL {
		fields = append(fields, FieldError{Field: "ttl_seconds", Message: fmt.Sprintf("must be %d to %d", int(MinShardLeaseTTL.Seconds()), int(MaxShardLeaseTTL.Seconds()))})
	}
	for i, h := range req.Held {
		if h.Shard < 0 || h.Shard >= max(req.ShardCount, 1) {
			fields = append(fields, FieldError{Field: fmt.Sprintf("held[%d].shard", i), Message: "must be in [0, shard_count)"})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return &Error{Code: CodeInvalid, Message: "the shard lease request is not valid", Fields: fields}
}

// planShardLeases decides a request against the locked state: the rows to write and the answer. It is the whole
// policy, a pure function of its inputs:
//   - the live replicas are the members whose membership has not expired, and the requester (unless it releases);
//   - with lower = floor(shards / live) and upper = ceil(shards / live), a replica keeps and takes up to upper
//     shards, or only up to lower while another live replica holds fewer than lower (so that a newcomer gets its
//     share from the others' surplus, and what they give back is not taken again by them);
//   - it keeps the lowest of the shards it holds, renews them, gives back the rest, and takes the lowest free or
//     expired shards;
//   - every change of holder (to another replica, or to none) takes the adapter's next generation, so that no
//     two holding periods of any shard share one.
func planShardLeases(st *ShardLeaseState, req ShardLeaseRequest) (ShardLeaseChanges, *ShardLeaseGrant, error) {
	now := st.Now
	leases := slices.Clone(st.Leases)
	next := int64(0)
	for _, l := range leases {
		next = max(next, l.Generation)
	}
	bump := func(l *ShardLease, holder string, expires time.Time) {
		next++
		l.Holder, l.Generation, l.ExpiresTime = holder, next, expires
	}
	liveHeld := func(l ShardLease) bool { return l.Holder != "" && l.Holder != req.Replica && l.ExpiresTime.After(now) }
	changes := ShardLeaseChanges{ShardCount: req.ShardCount}
	changed := map[int]bool{}
	if st.ShardCount != req.ShardCount {
		for _, l := range leases {
			if liveHeld(l) {
				return changes, nil, &Error{Code: CodeUnprocessable,
					Message: fmt.Sprintf("replica %q of %s holds a lease on shard %d of %d until %s: every replica needs the same shard count, %d; stop the others or give them the same count",
						l.Holder, req.Adapter, l.Shard, st.ShardCount, l.ExpiresTime.Format(time.RFC3339), st.ShardCount),
					Fields: []FieldError{{Field: "shard_count", Message: fmt.Sprintf("must be %d, the count live replicas use", st.ShardCount)}}}
			}
		}
		// Nobody live holds a lease under the old count: start over with the new one, every shard free at a
		// new generation.
		fresh := make([]ShardLease, req.ShardCount)
		for i := range fresh {
			fresh[i].Shard = i
			bump(&fresh[i], "", time.Time{})
			changed[i] = true
		}
		leases = fresh
	}

	expires := now.Add(req.TTL)
	members := map[string]bool{}
	for _, m := range st.Members {
		if m.ExpiresTime.After(now) && m.Replica != req.Replica {
			members[m.Replica] = true
		}
	}
	holds := map[string]int{}
	var mine []int
	for i, l := range leases {
		switch {
		case l.Holder == req.Replica:
			mine = append(mine, i)
		case liveHeld(l):
			members[l.Holder] = true
			holds[l.Holder]++
		}
	}
	live := len(members)
	if !req.Release {
		live++
	}
	quota := 0
	if live > 0 {
		lower, upper := req.ShardCount/live, (req.ShardCount+live-1)/live
		quota = upper
		for m := range members {
			if holds[m] < lower {
				quota = lower
				break
			}
		}
	}
	if req.Release {
		quota = 0
	}
	for n, i := range mine {
		if n < quota {
			leases[i].ExpiresTime = expires // renewed: same holder, same generation
		} else {
			bump(&leases[i], "", time.Time{})
		}
		changed[i] = true
	}
	taken := min(len(mine), quota)
	for i := range leases {
		if taken >= quota {
			break
		}
		if leases[i].Holder == req.Replica || liveHeld(leases[i]) {
			continue
		}
		bump(&leases[i], req.Replica, expires)
		changed[i] = true
		taken++
	}

	grant := &ShardLeaseGrant{Adapter: req.Adapter, Replica: req.Replica, ShardCount: req.ShardCount, TTL: req.TTL,
		Leases: []ShardLease{}, Lost: []int{}, LiveReplicas: live, Now: now}
	if live > 0 {
		grant.FairShare = (req.ShardCount + live - 1) / live
	}
	held := map[int]int64{}
	for i := range leases {
		if changed[i] {
			changes.Leases = append(changes.Leases, leases[i])
		}
		if leases[i].Holder == req.Replica {
			grant.Leases = append(grant.Leases, leases[i])
			held[leases[i].Shard] = leases[i].Generation
		}
	}
	for _, h := range req.Held {
		if g, ok := held[h.Shard]; !ok || g != h.Generation {
			grant.Lost = append(grant.Lost, h.Shard)
		}
	}
	slices.Sort(grant.Lost)
	grant.Lost = slices.Compact(grant.Lost)
	changes.Member = ShardMember{Replica: req.Replica, ExpiresTime: expires}
	changes.Leave = req.Release
	return changes, grant, nil
}

// leaseStamp is what a report's metadata says of the shard lease it was made under (pkg/shard's keys).
type leaseStamp struct {
	Shard           *int   `json:"shard"`
	ShardCount      *int   `json:"shard_count"`
	LeaseGeneration *int64 `json:"lease_generation"`
}

// readLeaseStamp returns the lease a report was made under, or nil for a report made without one (static sharding,
// or none): those are stored as ever. A stamp must name the shard of the resource id among its shard count.
func readLeaseStamp(metadata json.RawMessage, id string) (*leaseStamp, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &keys); err != nil || keys[shard.MetadataLeaseGeneration] == nil {
		return nil, nil //nolint:nilerr // metadata that is no object is refused by the report's own validation
	}
	invalid := func(field, msg string) error {
		return &Error{Code: CodeInvalid, Message: "the report's lease metadata is not valid",
			Fields: []FieldError{{Field: "metadata." + field, Message: msg}}}
	}
	var stamp leaseStamp
	if err := json.Unmarshal(metadata, &stamp); err != nil {
		return nil, invalid(shard.MetadataLeaseGeneration, shard.MetadataShard+", "+shard.MetadataShardCount+" and "+
			shard.MetadataLeaseGeneration+" must be integers")
	}
	switch {
	case *stamp.LeaseGeneration < 1:
		return nil, invalid(shard.MetadataLeaseGeneration, "must be a positive integer")
	case stamp.ShardCount == nil || *stamp.ShardCount < 1 || *stamp.ShardCount > MaxShardCount:
		return nil, invalid(shard.MetadataShardCount, fmt.Sprintf("must be 1 to %d with %s", MaxShardCount, shard.MetadataLeaseGeneration))
	case stamp.Shard == nil:
		return nil, invalid(shard.MetadataShard, "is required with "+shard.MetadataLeaseGeneration)
	case *stamp.Shard != shard.Of(id, *stamp.ShardCount):
		return nil, invalid(shard.MetadataShard, fmt.Sprintf("the resource is in shard %d of %d, not %d", shard.Of(id, *stamp.ShardCount), *stamp.ShardCount, *stamp.Shard))
	}
	return &stamp, nil
}
