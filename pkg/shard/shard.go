// Package shard is how the adapters' replicas split a fleet: the hash that puts a resource in a shard, and the
// report metadata that says which shard and lease a report was made under. Both the adapter runtime and the API
// read them, so they live here, on the standard library alone.
package shard

import "hash/fnv"

// Of returns the shard of a resource id among count shards. Every replica, and the API when it fences a report,
// must agree, so it depends on nothing but the id.
func Of(id string, count int) int {
	if count <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(count)) //nolint:gosec // count ≥ 2 here, and callers bound it far below 2^31
}

// The keys of a report's metadata that name the shard lease it was made under. A report that carries
// MetadataLeaseGeneration must carry the other two; the API stores it only while that generation is the current
// holder's of the adapter's lease on the shard (fencing), and only if the resource is in that shard.
const (
	// MetadataShard is the shard of the reported resource, Of(id, count).
	MetadataShard = "shard"
	// MetadataShardCount is the number of shards the replica splits the fleet into.
	MetadataShardCount = "shard_count"
	// MetadataLeaseGeneration is the fencing generation of the replica's lease on the shard.
	MetadataLeaseGeneration = "lease_generation"
)
