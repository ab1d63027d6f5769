package api

import (
	"fmt"
	"strconv"
	"strings"
)

// ShardHeader is the request header an adapter replica sends on every request: its shard as "<index>/<count>"
// (--shard-index, --shard-count). The API gives each adapter identity and shard a rate budget of its own, so that
// replicas splitting a fleet under one identity do not share one.
const ShardHeader = "X-Hyperfleet-Shard"

// MaxShardCount is the most shards a fleet may be split into, and the most budgets ShardHeader can claim.
const MaxShardCount = 1024

// FormatShard returns ShardHeader's value for shard index of count.
func FormatShard(index, count int) string { return fmt.Sprintf("%d/%d", index, count) }

// ParseShard reads ShardHeader's value; ok is false unless it is "<index>/<count>" with 0 ≤ index < count ≤
// MaxShardCount, in decimal without signs or leading zeros.
func ParseShard(v string) (index, count int, ok bool) {
	a, b, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	index, okA := decimal(a)
	count, okB := decimal(b)
	if !okA || !okB || count < 1 || count > MaxShardCount || index >= count {
		return 0, 0, false
	}
	return index, count, true
}

func decimal(s string) (int, bool) {
	if s == "" || len(s) > 4 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
