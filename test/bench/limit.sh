#!/usr/bin/env bash
# make bench-limit: the API against the same statements run raw through pgbench, and the CPU each request costs the
# API and PostgreSQL, per request kind; BENCH_RUNS interleaved runs of each build, medians in one markdown table.
#
# Each run of each build creates a fresh database on BENCH_PG (default: the local PostgreSQL), starts the build's
# hyperfleet-api on it (no auth, three required adapters) and drives it with hyperfleet-load (BENCH_CLIENTS clients,
# BENCH_CLUSTERS clusters, BENCH_REQUESTS requests per read and status phase). The create phase runs first; then
# the database is vacuumed and analyzed, as autovacuum does on a database that lives longer than a benchmark (without
# it the reads right after a bulk load are planned with no statistics and no visibility map); then the other phases.
# The API's CPU comes from its /metrics, PostgreSQL's from the /proc of the backends serving the database (the load's
# --db-url: PostgreSQL must run on this machine). Then, with the API stopped, pgbench runs with as many clients, on
# the same database, the SQL each request boils down to: create (the cluster row, its three placeholder reports and
# its change-feed event, in one statement as the API does), get by id, a list page of 100 with its count, a two-label
# search page of 100, and a status upsert. The database is dropped at the end of each run.
#
#   BENCH_BUILDS   builds to compare, "name=dir ..." (each dir holds hyperfleet-api); default "current=$BIN" (bin)
#   BENCH_RUNS     runs of each build, interleaved: A B, B A, A B, … (default 3)
#   BENCH_PHASES   phases to measure, of create,get,list,search,status (default all); status alone still creates the
#                  clusters it reports on, unmeasured
#   BENCH_LOAD     the hyperfleet-load that drives every build (default bin/hyperfleet-load: this checkout's, which
#                  also drives the API of main @074dd4e)
#   BENCH_PGBENCH  0 to skip the raw pgbench runs (default 1)
#
# Before each run's load it also takes 5 s of PostgreSQL CPU with the API idle (its feed's polls, its leases), which
# every DB CPU figure includes, and prints the median under the table.
#
# It prints one markdown table, ready for the README: per phase and build, the medians of the API's req/s,
# pgbench's tx/s, their ratio, and the API's and PostgreSQL's CPU time per request. Every run's figures go to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
clients=${BENCH_CLIENTS:-8}
clusters=${BENCH_CLUSTERS:-10000}
requests=${BENCH_REQUESTS:-5000}
seconds=${BENCH_SECONDS:-10}
runs=${BENCH_RUNS:-3}
builds=${BENCH_BUILDS:-current=${BIN:-bin}}
phases=${BENCH_PHASES:-create,get,list,search,status}
load=${BENCH_LOAD:-bin/hyperfleet-load}
raw=${BENCH_PGBENCH:-1}
api_port=${BENCH_API_PORT:-18000}
metrics_port=${BENCH_METRICS_PORT:-19090}
health_port=${BENCH_HEALTH_PORT:-18080}

say() { printf '[%s] bench-limit: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
for tool in pgbench psql; do
	command -v "$tool" >/dev/null || { say "ERROR: $tool is missing (apt-get install postgresql-client)"; exit 1; }
done
[ -x "$load" ] || { say "ERROR: no $load: build first (make build) or set BENCH_LOAD"; exit 1; }
names=()
declare -A dirs
for b in $builds; do
	name=${b%%=*} dir=${b#*=}
	[ "$name" != "$b" ] || { say "ERROR: BENCH_BUILDS: $b is not name=dir"; exit 1; }
	[ -x "$dir/hyperfleet-api" ] || { say "ERROR: no $dir/hyperfleet-api (build $name)"; exit 1; }
	names+=("$name")
	dirs[$name]=$dir
done
for p in ${phases//,/ }; do
	case $p in create | get | list | search | status) ;; *) say "ERROR: BENCH_PHASES: unknown phase $p"; exit 1 ;; esac
done
reads=$(echo "$phases" | tr ',' '\n' | grep -v '^create$' | paste -sd, || true)
# Whether the load can watch PostgreSQL's backends (older hyperfleet-loads cannot).
db_flag=()
[[ $("$load" --help 2>&1 || true) == *--db-url* ]] && db_flag=(--db-url)

# shellcheck source=test/bench/api.sh
. test/bench/api.sh
results=$(mktemp)
trap 'stop_api; rm -f "$results"' EXIT
say "builds ${names[*]}, $runs interleaved runs: $clients clients, $clusters clusters, $requests requests per phase, pgbench ${seconds}s per statement"

# pgbench_sql PHASE writes the raw SQL of PHASE to $work/PHASE.sql, with the values the load used.
pgbench_sql() {
	local cols="id, name, labels, spec, generation, version, phase, conditions, created_time, updated_time, created_by, updated_by, deleted_time, deleted_by"
	case $1 in
	create) cat <<SQL ;;
WITH ins AS (INSERT INTO clusters (id, name, labels, spec, generation, phase, conditions, aggregated_for, created_time, updated_time, created_by, updated_by)
  VALUES (gen_random_uuid(), 'raw-' || gen_random_uuid(), '{"env": "prod", "shard": "7"}', '$spec', 1, 'Pending', '$conditions', '', now(), now(), 'bench', 'bench') RETURNING id),
placeholders AS (INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation)
  SELECT ins.id, 'Cluster', a, now(), 1 FROM ins CROSS JOIN unnest('{load-a,load-b,load-c}'::text[]) AS a),
staged AS (INSERT INTO event_staging (type, kind, resource_id, generation, version) SELECT 'created', 'Cluster', ins.id, 1, 1 FROM ins)
SELECT count(*) FROM ins;
SQL
	get) cat <<SQL ;;
\set n random(1, $n)
SELECT $cols FROM clusters WHERE id = (SELECT id FROM bench_ids WHERE n = :n);
SQL
	list) cat <<SQL ;;
\set p random(0, $((n / 100 - 1)))
SELECT $cols FROM clusters WHERE id IN (SELECT id FROM clusters WHERE deleted_time IS NULL ORDER BY created_time, id LIMIT 100 OFFSET :p * 100) ORDER BY created_time, id;
SELECT count(*) FROM clusters WHERE deleted_time IS NULL;
SQL
	search) cat <<SQL ;;
\set e random(1, 4)
\set s random(0, 99)
SELECT $cols FROM clusters WHERE deleted_time IS NULL AND labels @> jsonb_build_object('env', (ARRAY['prod','staging','dev','test'])[:e])
  AND labels @> jsonb_build_object('shard', :s::text) ORDER BY created_time, id LIMIT 100;
SQL
	status) cat <<SQL ;;
\set n random(1, $n)
\set a random(1, 3)
INSERT INTO adapter_statuses (resource_id, kind, adapter, observed_generation, observed_time, conditions, data, metadata, created_time, last_report_time, resource_generation)
  VALUES ((SELECT id FROM bench_ids WHERE n = :n), 'Cluster', (ARRAY['load-a','load-b','load-c'])[:a], 1, now(),
  '[{"type": "Available", "status": "True"}, {"type": "Health", "status": "True"}]', '{"load": true}', '{}', now(), now(), 1)
  ON CONFLICT (resource_id, adapter) DO UPDATE SET observed_generation = EXCLUDED.observed_generation,
  observed_time = EXCLUDED.observed_time, conditions = EXCLUDED.conditions, data = EXCLUDED.data, last_report_time = EXCLUDED.last_report_time;
SQL
	esac >"$work/$1.sql"
}

# backend_ns prints the CPU nanoseconds of the client backends of the database at $url so far (psql's own aside).
backend_ns() {
	local pid total=0
	for pid in $(psql -qAt "$url" -c "SELECT pid FROM pg_stat_activity WHERE datname = current_database()
		AND backend_type = 'client backend' AND pid <> pg_backend_pid()"); do
		total=$((total + $(cut -d' ' -f1 "/proc/$pid/schedstat" 2>/dev/null || echo 0)))
	done
	echo "$total"
}

# measure NAME RUN: one run of one build; appends "name run phase api_rps raw_tps api_cpu db_cpu" per phase.
measure() {
	local name=$1 run=$2 phase line rps cpu dbcpu tps out
	bin=${dirs[$name]}
	start_api "limit_${name//[^a-zA-Z0-9]/_}_$run" 'cluster=load-a,load-b,load-c'
	trap 'stop_api; rm -f "$results"' EXIT
	say "run $run, build $name ($bin)"
	# What the API costs PostgreSQL with no request at all (its feed's polls, its leases), which every phase's
	# figure includes: over 5 s before the load.
	local idle_from idle
	idle_from=$(backend_ns)
	sleep 5
	idle=$(awk -v a="$idle_from" -v b="$(backend_ns)" 'BEGIN { printf "%.1f", (b - a) / 5e6 }')
	echo "$name $run idle - - - $idle" >>"$results"
	local common=(--url "http://127.0.0.1:$api_port" --metrics-url "http://127.0.0.1:$metrics_port/metrics"
		--clusters "$clusters" --requests "$requests" --concurrency "$clients" --prefix "limit-$run")
	[ ${#db_flag[@]} -gt 0 ] && common+=(--db-url "$url")
	"$load" "${common[@]}" --phases create | tee "$work/load.txt" >&2
	# What autovacuum does to a table soon after a bulk load: statistics for the planner, and the visibility map
	# that index-only scans read.
	psql -q "$url" -c "VACUUM ANALYZE" >/dev/null
	[ -z "$reads" ] || "$load" "${common[@]}" --phases "$reads" | tee -a "$work/load.txt" >&2
	kill "$api_pid"
	wait "$api_pid" 2>/dev/null || true
	api_pid=""

	declare -A tx=()
	if [ "$raw" = 1 ]; then
		spec=$(psql -qAt "$url" -c "SELECT spec FROM clusters LIMIT 1" | sed "s/'/''/g")
		conditions=$(psql -qAt "$url" -c "SELECT conditions FROM clusters LIMIT 1" | sed "s/'/''/g")
		psql -q "$url" -c "CREATE TABLE bench_ids AS SELECT row_number() OVER (ORDER BY id) AS n, id FROM clusters; CREATE UNIQUE INDEX ON bench_ids (n); ANALYZE" >/dev/null
		n=$(psql -qAt "$url" -c "SELECT count(*) FROM bench_ids")
		for phase in ${phases//,/ }; do
			pgbench_sql "$phase"
			# An older build's schema may lack what this SQL names (the change feed's staging): then no raw figure.
			if out=$(pgbench -n -c "$clients" -j "$clients" -T "$seconds" -f "$work/$phase.sql" "$url" 2>&1); then
				tx[$phase]=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p')
			else
				say "pgbench $phase failed on build $name's schema: $(echo "$out" | grep -m1 -i error || true)"
			fi
		done
	fi
	for phase in ${phases//,/ }; do
		line=$(grep -E "^$phase " "$work/load.txt" || true)
		rps=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "req/s") print $(i-1)}')
		cpu=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "API") print $(i+1)}')
		dbcpu=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "DB") print $(i+1)}')
		echo "$name $run $phase ${rps:--} ${tx[$phase]:--} ${cpu:--} ${dbcpu:--}" | tee -a "$results" >&2
	done
	stop_api
}

for run in $(seq 1 "$runs"); do
	order=("${names[@]}")
	if [ $((run % 2)) = 0 ]; then
		order=()
		for ((i = ${#names[@]} - 1; i >= 0; i--)); do order+=("${names[i]}"); done
	fi
	for name in "${order[@]}"; do measure "$name" "$run"; done
done

# median of the numbers on stdin ("-" when there are none).
median() {
	{ grep -E '^[0-9.]+$' || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
		else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# col NAME PHASE FIELD: the median of one column of results (4 API req/s, 5 raw tx/s, 6 API CPU, 7 DB CPU; 8 API/raw).
col() {
	awk -v b="$1" -v p="$2" -v f="$3" '$1 == b && $3 == p {
		if (f == 8) { if ($4 != "-" && $5 != "-" && $5 > 0) print 100 * $4 / $5 } else print $f }' "$results" | median
}
fmt() { awk -v v="$1" -v f="$2" 'BEGIN { if (v == "-") print "-"; else printf f, v }'; }
echo
echo "Median of $runs interleaved runs; $clients clients, $clusters clusters, $requests requests per phase, pgbench ${seconds}s per statement; CPU in ms per request."
echo
header="| request |" rule="|---|"
for name in "${names[@]}"; do
	header+=" $name API req/s | $name pgbench tx/s | $name API/raw | $name API CPU | $name DB CPU |"
	rule+="---:|---:|---:|---:|---:|"
done
echo "$header"
echo "$rule"
for phase in ${phases//,/ }; do
	line="| $phase |"
	for name in "${names[@]}"; do
		rps=$(col "$name" "$phase" 4) tps=$(col "$name" "$phase" 5) share=$(col "$name" "$phase" 8)
		cpu=$(col "$name" "$phase" 6) dbcpu=$(col "$name" "$phase" 7)
		line+=" $(fmt "$rps" %.0f) | $(fmt "$tps" %.0f) | $(fmt "$share" %.0f%%) | $(fmt "$cpu" %.2f) | $(fmt "$dbcpu" %.2f) |"
	done
	echo "$line"
done
echo
line="PostgreSQL's CPU with the API idle (its feed's polls and leases; in every DB CPU figure above):"
for name in "${names[@]}"; do line+=" $name $(col "$name" idle 7) ms/s;"; done
echo "${line%;}."
