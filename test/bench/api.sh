# Sourced by the bench scripts: start_api NAME REQUIRED [SERVE FLAG...] creates a fresh database hf_NAME_<pid> on $pg,
# migrates it with the REQUIRED adapters and serves $bin/hyperfleet-api on it (no auth unless the extra serve flags
# turn it on, no rate limit) at $api_port, $health_port and $metrics_port; the database, the API and $work go when
# the script exits. It sets url (the database's), work (a scratch directory) and api_pid, and needs say() defined.

start_api() {
	local base query name=$1 required=$2
	shift 2
	db=hf_${name}_$$
	base=${pg%%\?*}
	base=${base%/*}
	query=${pg#*\?}
	[ "$query" = "$pg" ] && query=""
	url="$base/$db${query:+?$query}"
	work=$(mktemp -d)
	api_pid=""
	trap stop_api EXIT

	say "database $db on ${base#*@}"
	psql -q "$pg" -c "CREATE DATABASE $db" >/dev/null
	# Older builds (before migrate took them, as at 074dd4e) are told their required adapters by serve.
	local migrate_req=(--required-adapters "$required") serve_req=()
	local help
	help=$("$bin/hyperfleet-api" migrate --help 2>&1 || true)
	if [[ $help != *--required-adapters* ]]; then
		migrate_req=() serve_req=(--required-adapters "$required")
	fi
	"$bin/hyperfleet-api" migrate --db-url "$url" "${migrate_req[@]}" 2>"$work/migrate.log" ||
		{ cat "$work/migrate.log" >&2; exit 1; }
	"$bin/hyperfleet-api" serve --db-url "$url" --api-server-bindaddress "127.0.0.1:$api_port" \
		--health-server-bindaddress "127.0.0.1:$health_port" --metrics-server-bindaddress "127.0.0.1:$metrics_port" \
		--rate-limit 0 --log-level warn "${serve_req[@]}" "$@" 2>"$work/api.log" &
	api_pid=$!
	for _ in $(seq 1 100); do
		curl -sf "http://127.0.0.1:$health_port/readyz" >/dev/null && return 0
		sleep 0.1
	done
	say "ERROR: the API did not get ready"
	cat "$work/api.log" >&2
	exit 1
}

# stop_api stops the API (when it runs) and drops the database.
stop_api() {
	[ -n "$api_pid" ] && kill "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null || true
	api_pid=""
	psql -q "$pg" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	rm -rf "$work"
}
