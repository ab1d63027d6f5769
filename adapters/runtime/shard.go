package adapter

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
)

// shardOf returns the shard of a resource id among count shards. Every replica must agree, so it depends on
// nothing but the id.
func shardOf(id string, count int) int {
	if count <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(count))
}

// shardSample is how many recently updated resources checkShards looks at.
const shardSample = 10

// checkShards refuses to start when a recent report of this adapter, from another replica, says it runs with
// another --shard-count: the fleet would be split two ways, some resources reconciled twice and others never.
// Changing the shard count therefore means stopping every replica first.
func (r *Runner) checkShards(ctx context.Context) error {
	q := url.Values{"size": {fmt.Sprint(shardSample)}, "order": {"updated_time desc"}, "include_deleted": {"true"},
		"fields": {"id,owner_references"}}
	var list struct {
		Items []wireResource `json:"items"`
	}
	if err := r.client.do(ctx, "list recent", http.MethodGet, "/"+r.cfg.Kind.Plural+"?"+q.Encode(), nil, &list); err != nil {
		// Not knowing is no reason to refuse: the API may be starting too. The poll will keep trying.
		r.log.Warn("could not check other replicas' shard count", slog.Any("error", err))
		return nil
	}
	window := 3 * r.cfg.PollInterval
	if r.cfg.ResyncAfter > window {
		window = r.cfg.ResyncAfter
	}
	for _, it := range list.Items {
		key := Key{ID: it.ID}
		if it.OwnerReferences != nil {
			key.ParentID = it.OwnerReferences.ID
		}
		var statuses struct {
			Items []struct {
				Adapter      string         `json:"adapter"`
				ObservedTime string         `json:"observed_time"`
				Metadata     map[string]any `json:"metadata"`
			} `json:"items"`
		}
		if err := r.client.do(ctx, "list statuses", http.MethodGet, r.cfg.Kind.path(key)+"/statuses", nil, &statuses); err != nil {
			continue
		}
		for _, st := range statuses.Items {
			count, ok := st.Metadata["shard_count"].(float64)
			replica, _ := st.Metadata["replica"].(string)
			if st.Adapter != r.cfg.Adapter || !ok || replica == r.cfg.Replica || int(count) == r.cfg.ShardCount {
				continue
			}
			if t, err := parseTime(st.ObservedTime); err != nil || r.clock.Since(t) > window {
				continue
			}
			return fmt.Errorf("replica %q of %s reported on %s %s within the last %s with --shard-count %d, but this one has %d: "+
				"every replica needs the same --shard-count; stop the others before changing it",
				replica, r.cfg.Adapter, r.cfg.Kind.Name, it.ID, window, int(count), r.cfg.ShardCount)
		}
	}
	return nil
}
