#!/usr/bin/env bash
# make bench-limit: the API against the same statements run raw through pgbench, in one run, on one database.
#
# It creates a fresh database on BENCH_PG (default: the local PostgreSQL), starts bin/hyperfleet-api on it (no
# auth, three required adapters), drives it with bin/hyperfleet-load (BENCH_CLIENTS clients, BENCH_CLUSTERS
# clusters, BENCH_REQUESTS requests per read and status phase), then runs through pgbench, with as many clients,
# the SQL each request boils down to: create (the cluster row, its three placeholder reports and its change-feed
# event, in one statement as the API does), get by id, a list page of 100 with its count, a two-label search page
# of 100, and a status upsert. It prints, per phase, the API's requests per second, pgbench's transactions per
# second, the ratio, and the API's own CPU time per request. The database is dropped at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
clients=${BENCH_CLIENTS:-8}
clusters=${BENCH_CLUSTERS:-10000}
requests=${BENCH_REQUESTS:-5000}
seconds=${BENCH_SECONDS:-10}
bin=${BIN:-bin}
api_port=${BENCH_API_PORT:-18000}
metrics_port=${BENCH_METRICS_PORT:-19090}
health_port=${BENCH_HEALTH_PORT:-18080}

say() { printf '[%s] bench-limit: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
for tool in pgbench psql; do
	command -v "$tool" >/dev/null || { say "ERROR: $tool is missing (apt-get install postgresql-client)"; exit 1; }
done
[ -x "$bin/hyperfleet-api" ] && [ -x "$bin/hyperfleet-load" ] || { say "ERROR: build first (make build)"; exit 1; }

# shellcheck source=test/bench/api.sh
. test/bench/api.sh
start_api limit 'cluster=load-a,load-b,load-c'
say "$clients clients, $clusters clusters, $requests requests per phase, pgbench ${seconds}s per statement"

say "load: create, get, list, search, status through the API"
"$bin/hyperfleet-load" --url "http://127.0.0.1:$api_port" --metrics-url "http://127.0.0.1:$metrics_port/metrics" \
	--clusters "$clusters" --requests "$requests" --concurrency "$clients" --phases create,get,list,search,status \
	--prefix limit | tee "$work/load.txt" >&2
kill "$api_pid"
wait "$api_pid" 2>/dev/null || true
api_pid=""

# The statements as the API sends them, with the values the load used.
spec=$(psql -qAt "$url" -c "SELECT spec FROM clusters LIMIT 1" | sed "s/'/''/g")
conditions=$(psql -qAt "$url" -c "SELECT conditions FROM clusters LIMIT 1" | sed "s/'/''/g")
psql -q "$url" -c "CREATE TABLE bench_ids AS SELECT row_number() OVER (ORDER BY id) AS n, id FROM clusters; CREATE UNIQUE INDEX ON bench_ids (n); ANALYZE" >/dev/null
n=$(psql -qAt "$url" -c "SELECT count(*) FROM bench_ids")
cols="id, name, labels, spec, generation, version, phase, conditions, created_time, updated_time, created_by, updated_by, deleted_time, deleted_by"
cat >"$work/create.sql" <<SQL
WITH ins AS (INSERT INTO clusters (id, name, labels, spec, generation, phase, conditions, aggregated_for, created_time, updated_time, created_by, updated_by)
  VALUES (gen_random_uuid(), 'raw-' || gen_random_uuid(), '{"env": "prod", "shard": "7"}', '$spec', 1, 'Pending', '$conditions', '', now(), now(), 'bench', 'bench') RETURNING id),
placeholders AS (INSERT INTO adapter_statuses (resource_id, kind, adapter, created_time, resource_generation)
  SELECT ins.id, 'Cluster', a, now(), 1 FROM ins CROSS JOIN unnest('{load-a,load-b,load-c}'::text[]) AS a),
staged AS (INSERT INTO event_staging (type, kind, resource_id, generation, version) SELECT 'created', 'Cluster', ins.id, 1, 1 FROM ins)
SELECT count(*) FROM ins;
SQL
cat >"$work/get.sql" <<SQL
\set n random(1, $n)
SELECT $cols FROM clusters WHERE id = (SELECT id FROM bench_ids WHERE n = :n);
SQL
cat >"$work/list.sql" <<SQL
\set p random(0, $((n / 100 - 1)))
SELECT $cols FROM clusters WHERE id IN (SELECT id FROM clusters WHERE deleted_time IS NULL ORDER BY created_time, id LIMIT 100 OFFSET :p * 100) ORDER BY created_time, id;
SELECT count(*) FROM clusters WHERE deleted_time IS NULL;
SQL
cat >"$work/search.sql" <<SQL
\set e random(1, 4)
\set s random(0, 99)
SELECT $cols FROM clusters WHERE deleted_time IS NULL AND labels @> jsonb_build_object('env', (ARRAY['prod','staging','dev','test'])[:e])
  AND labels @> jsonb_build_object('shard', :s::text) ORDER BY created_time, id LIMIT 100;
SQL
cat >"$work/status.sql" <<SQL
\set n random(1, $n)
\set a random(1, 3)
INSERT INTO adapter_statuses (resource_id, kind, adapter, observed_generation, observed_time, conditions, data, metadata, created_time, last_report_time, resource_generation)
  VALUES ((SELECT id FROM bench_ids WHERE n = :n), 'Cluster', (ARRAY['load-a','load-b','load-c'])[:a], 1, now(),
  '[{"type": "Available", "status": "True"}, {"type": "Health", "status": "True"}]', '{"load": true}', '{}', now(), now(), 1)
  ON CONFLICT (resource_id, adapter) DO UPDATE SET observed_generation = EXCLUDED.observed_generation,
  observed_time = EXCLUDED.observed_time, conditions = EXCLUDED.conditions, data = EXCLUDED.data, last_report_time = EXCLUDED.last_report_time;
SQL

declare -A raw
for phase in create get list search status; do
	say "pgbench: $phase"
	out=$(pgbench -n -c "$clients" -j "$clients" -T "$seconds" -f "$work/$phase.sql" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
	raw[$phase]=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p')
done

printf '\n%-8s %12s %12s %8s %14s\n' phase "API req/s" "raw tps" "API/raw" "API CPU/req"
for phase in create get list search status; do
	line=$(grep -E "^$phase " "$work/load.txt" || true)
	rps=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "req/s") print $(i-1)}')
	cpu=$(echo "$line" | awk '{for (i = 1; i <= NF; i++) if ($i == "API") print $(i+1)}')
	ratio=$(awk -v a="$rps" -v b="${raw[$phase]}" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "-" }')
	printf '%-8s %12s %12.0f %8s %11s ms\n' "$phase" "$rps" "${raw[$phase]}" "$ratio" "$cpu"
done
