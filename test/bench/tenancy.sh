#!/usr/bin/env bash
# make bench-tenancy: the API's CPU time per request with tenancy on versus off, for create, get, list and search.
#
# Both modes serve bin/hyperfleet-api with JWT and roles on, trusting a development issuer, and drive it with
# bin/hyperfleet-load as one user (subject bench-tenant, roles user and platform: the load makes sure of its version
# stream first, which an admin has created for it); "on" adds --tenant-claim sub, so that the user is confined to
# tenant bench-tenant (a scoped transaction with row-level security per request, tenant filters in
# every query), "off" serves one tenant as before. Each run gets a fresh database of BENCH_CLUSTERS clusters
# created by the load itself; BENCH_RUNS runs of each mode alternate (off on, on off, …) so that drift of the
# machine falls on both. It prints, per phase, the median CPU/req and req/s of each mode and on/off.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
clients=${BENCH_CLIENTS:-8}
clusters=${BENCH_CLUSTERS:-10000}
requests=${BENCH_REQUESTS:-5000}
runs=${BENCH_RUNS:-3}
bin=${BIN:-bin}
api_port=${BENCH_API_PORT:-18000}
metrics_port=${BENCH_METRICS_PORT:-19090}
health_port=${BENCH_HEALTH_PORT:-18080}
phases=create,get,list,search

say() { printf '[%s] bench-tenancy: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v psql >/dev/null || { say "ERROR: psql is missing (apt-get install postgresql-client)"; exit 1; }
[ -x "$bin/hyperfleet-api" ] && [ -x "$bin/hyperfleet-load" ] || { say "ERROR: build first (make build)"; exit 1; }

# shellcheck source=test/bench/api.sh
. test/bench/api.sh
issuer=$(mktemp -d)
results=$(mktemp)
trap 'rm -rf "$issuer" "$results"' EXIT
token=$("$bin/hyperfleet-api" token --dir "$issuer" --subject bench-tenant --roles user,platform 2>/dev/null)
admin=$("$bin/hyperfleet-api" token --dir "$issuer" --subject bench-admin --roles admin 2>/dev/null)
auth=(--enable-jwt --enable-authz --jwk-cert-file "$issuer/dev-jwks.json" --jwt-issuer hyperfleet-dev --jwt-audience hyperfleet)
say "$runs runs per mode: $clients clients, $clusters clusters, $requests requests per read phase"

measure() { # measure MODE RUN
	local flags=("${auth[@]}")
	[ "$1" = on ] && flags+=(--tenant-claim sub)
	start_api "tenancy_$1" 'cluster=load-a' "${flags[@]}"
	trap 'stop_api; rm -rf "$issuer" "$results"' EXIT
	say "run $2, tenancy $1"
	curl -sf -o /dev/null -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
		-d '{"name": "load-4-16", "spec": {"target_version": "4.16"}}' "http://127.0.0.1:$api_port/api/hyperfleet/v1/versionstreams"
	HYPERFLEET_TOKEN=$token "$bin/hyperfleet-load" --url "http://127.0.0.1:$api_port" \
		--metrics-url "http://127.0.0.1:$metrics_port/metrics" --clusters "$clusters" --requests "$requests" \
		--concurrency "$clients" --phases "$phases" --prefix "tenancy-$1-$2" >"$work/load.txt"
	# One line per phase: mode phase CPU/req req/s.
	awk -v mode="$1" '{ for (i = 1; i <= NF; i++) { if ($i == "req/s") rps = $(i-1); if ($i == "API") cpu = $(i+1) }
		print mode, $1, cpu, rps }' "$work/load.txt" | grep -E " (${phases//,/|}) " >>"$results"
	stop_api
}

for run in $(seq 1 "$runs"); do
	if [ $((run % 2)) = 1 ]; then order="off on"; else order="on off"; fi
	for mode in $order; do measure "$mode" "$run"; done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '\n%-8s %14s %14s %8s %12s %12s\n' phase "CPU/req off" "CPU/req on" "on/off" "req/s off" "req/s on"
for phase in ${phases//,/ }; do
	off=$(awk -v p="$phase" '$1 == "off" && $2 == p { print $3 }' "$results" | median)
	on=$(awk -v p="$phase" '$1 == "on" && $2 == p { print $3 }' "$results" | median)
	roff=$(awk -v p="$phase" '$1 == "off" && $2 == p { print $4 }' "$results" | median)
	ron=$(awk -v p="$phase" '$1 == "on" && $2 == p { print $4 }' "$results" | median)
	ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
	printf '%-8s %11s ms %11s ms %8s %12s %12s\n' "$phase" "$off" "$on" "$ratio" "$roff" "$ron"
done
say "every run (mode phase CPU/req req/s):"
sort -k2,2 -k1,1 "$results" >&2
