#!/usr/bin/env bash
# make bench-scale: does a request cost the same whatever the fleet's size?
#
# It creates a fresh database on BENCH_PG (default: the local PostgreSQL) whose clusters require ten adapters
# (so every cluster has ten status rows: 100,000 clusters make 1,000,000), starts bin/hyperfleet-api on it (no
# auth), and measures at one client (latency, not throughput) the get, list (a random page of 100 by number),
# walk (a page of 100 by cursor, without the count), label search and status write requests, first with
# BENCH_SMALL clusters (1,000), then after growing the fleet to BENCH_LARGE (100,000). It prints p50 and p99 of
# each at both sizes and the API's peak RSS. The database is dropped at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
small=${BENCH_SMALL:-1000}
large=${BENCH_LARGE:-100000}
requests=${BENCH_REQUESTS:-2000}
bin=${BIN:-bin}
api_port=${BENCH_API_PORT:-18001}
metrics_port=${BENCH_METRICS_PORT:-19091}
health_port=${BENCH_HEALTH_PORT:-18081}
adapters=a01,a02,a03,a04,a05,a06,a07,a08,a09,a10

say() { printf '[%s] bench-scale: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v psql >/dev/null || { say "ERROR: psql is missing (apt-get install postgresql-client)"; exit 1; }
[ -x "$bin/hyperfleet-api" ] && [ -x "$bin/hyperfleet-load" ] || { say "ERROR: build first (make build)"; exit 1; }
[ "$large" -gt "$small" ] || { say "ERROR: BENCH_LARGE ($large) must exceed BENCH_SMALL ($small)"; exit 1; }

# shellcheck source=test/bench/api.sh
. test/bench/api.sh
start_api scale "cluster=$adapters"
say "clusters requiring $adapters; $small then $large clusters; $requests requests per phase"

load() {
	"$bin/hyperfleet-load" --url "http://127.0.0.1:$api_port" --metrics-url "http://127.0.0.1:$metrics_port/metrics" \
		--adapters "$adapters" --phase-limit 30m "$@"
}
# measure SIZE: the read and write phases at one client, on the clusters the last create made.
measure() {
	say "$1 clusters: get, list, walk, search, status at one client"
	load --clusters "$2" --requests "$requests" --concurrency 1 --phases get,list,walk,search,status | tee "$work/at-$1.txt" >&2
}

say "creating $small clusters"
load --clusters "$small" --concurrency 8 --phases create --prefix small | tee "$work/create-small.txt" >&2
measure "$small" "$small"
say "creating $((large - small)) more clusters (progress: the API's log and pg_stat_activity; ~1 ms each)"
load --clusters "$((large - small))" --concurrency 8 --phases create --prefix large | tee "$work/create-large.txt" >&2
# What autovacuum does some time after a bulk load, done now: fresh statistics for the planner and a current
# visibility map for index-only scans (the exact count of a page-number list).
say "VACUUM ANALYZE after the bulk load"
psql -q "$url" -c "VACUUM ANALYZE clusters" -c "VACUUM ANALYZE adapter_statuses" >/dev/null
measure "$large" "$((large - small))"
rows=$(psql -qAt "$url" -c "SELECT count(*) FROM adapter_statuses")

field() { # field FILE PHASE WORD: the value after WORD on PHASE's line
	awk -v p="$2" -v w="$3" '$1 == p { for (i = 1; i <= NF; i++) if ($i == w) print $(i+1) }' "$1"
}
printf '\n%s clusters and %s status rows at the end; one client\n' "$large" "$rows"
printf '%-8s %12s %12s %12s %12s\n' phase "p50 @$small" "p99 @$small" "p50 @$large" "p99 @$large"
for phase in get list walk search status; do
	printf '%-8s %12s %12s %12s %12s\n' "$phase" "$(field "$work/at-$small.txt" "$phase" p50)" \
		"$(field "$work/at-$small.txt" "$phase" p99)" "$(field "$work/at-$large.txt" "$phase" p50)" \
		"$(field "$work/at-$large.txt" "$phase" p99)"
done
peak=$(cat "$work"/create-*.txt "$work"/at-*.txt | awk '{for (i = 1; i <= NF; i++) if ($i == "MiB") print $(i-1)}' | sort -n | tail -n 1)
printf 'API RSS at the end of any phase, highest: %s MiB\n' "$peak"
