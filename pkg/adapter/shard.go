package adapter

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/shard"
)

// ShardOf returns the shard of a resource id among count shards: the replica with --shard-index ShardOf(id, count)
// reconciles it. Every replica must agree, so it depends on nothing but the id.
func ShardOf(id string, count int) int { return shard.Of(id, count) }

// shardSample is how many recently updated resources checkShards looks at.
const shardSample = 10

// checkShards refuses to start when a recent report of this adapter, from another replica, says it runs with
// another --shard-count (or another value of one of Config.Agreed): the fleet would be split two ways, some resources reconciled twice and others never.
// Changing the shard count therefore means stopping every replica first.
func (r *Runner) checkShards(ctx context.Context, kind *Kind) error {
	recent, err := r.api.list(withOp(ctx, "list recent"), kind, "",
		listQuery{size: shardSample, order: "updated_time desc", includeDeleted: true, fields: "id,owner_references"})
	if err != nil {
		// Not knowing is no reason to refuse: the API may be starting too. The poll will keep trying.
		r.log.Warn("could not check other replicas' shard count", slog.Any("error", err))
		return nil
	}
	// A running replica reports a change within a few seconds (a poll of the poll source, or an event; the slow
	// safety-net poll of the other sources must not widen the window) and a settled resource within ResyncAfter.
	window := max(3*min(r.cfg.PollInterval, DefaultPollInterval), r.cfg.ResyncAfter)
	for _, key := range recent.items {
		st, err := r.api.status(withOp(ctx, "list statuses"), kind, key.ParentID, key.ID, r.cfg.Adapter)
		if err != nil || st == nil || r.clock.Since(st.ObservedTime) > window {
			continue
		}
		replica, _ := st.Metadata["replica"].(string)
		if replica == r.cfg.Replica {
			continue
		}
		if err := r.checkAgreed(st.Metadata, replica, kind, key.ID, window); err != nil {
			return err
		}
		count, ok := st.Metadata["shard_count"].(float64)
		if !ok || int(count) == r.cfg.ShardCount {
			continue
		}
		return fmt.Errorf("replica %q of %s reported on %s %s within the last %s with --shard-count %d, but this one has %d: "+
			"every replica needs the same --shard-count; stop the others before changing it",
			replica, r.cfg.Adapter, kind.Name, key.ID, window, int(count), r.cfg.ShardCount)
	}
	return nil
}

// checkAgreed refuses another replica's report that gives one of Config.Agreed another value.
func (r *Runner) checkAgreed(metadata map[string]any, replica string, kind *Kind, id string, window time.Duration) error {
	for _, k := range slices.Sorted(maps.Keys(r.cfg.Agreed)) {
		theirs, ok := metadata[k].(string)
		if !ok || theirs == r.cfg.Agreed[k] {
			continue
		}
		return fmt.Errorf("replica %q of %s reported on %s %s within the last %s with %s %q, but this one has %q: "+
			"every replica needs the same %s; stop the others before changing it",
			replica, r.cfg.Adapter, kind.Name, id, window, k, theirs, r.cfg.Agreed[k], k)
	}
	return nil
}
