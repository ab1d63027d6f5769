#!/usr/bin/env bash
# make bench-fleet: what one cluster costs the whole system over its life.
#
# It runs the system the way `make run` does, through hyperfleet-dev up (the API with development tokens, two
# management clusters each a real kube-apiserver and etcd with a hypershift-sim, cincinnati-sim, hivelocity-sim and
# the four adapters), on a fresh database of BENCH_PG and a scratch dev dir, on ports from BENCH_FLEET_PORT up (16
# of them), with the simulators at zero delay: hypershift-sim rolls out and deletes at once, hivelocity-sim reloads
# in milliseconds (and its rate-limit window shrinks alike). The management clusters have room for every cluster.
# Then bin/fleet-bench (test/bench/fleet) creates BENCH_FLEET_N clusters with a node pool of three devices each,
# BENCH_FLEET_CONCURRENCY at a time, waits until all are Ready, deletes them all, waits until all are gone, and
# prints one markdown table. Everything it started, the database and the dev dir go when it exits or is interrupted.
#
# BENCH_FLEET_UP_FLAGS adds flags to hyperfleet-dev up, e.g. an adapter's flag:
#   BENCH_FLEET_UP_FLAGS='--arg hostedcluster-applier=--kube-api-qps=5 --arg hostedcluster-applier=--kube-api-burst=10'
# BENCH_FLEET_KEEP=1 keeps the dev dir (the components' logs) and prints where it is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

n=${BENCH_FLEET_N:-200}
concurrency=${BENCH_FLEET_CONCURRENCY:-32}
pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
bin=${BIN:-bin}
assets=${KUBEBUILDER_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/k8s/1.37.2}
port=${BENCH_FLEET_PORT:-27000}
timeout=${BENCH_FLEET_TIMEOUT:-30m}
# A reload of ten minutes takes 6 ms; the provisioner's intervals follow (hyperfleet-dev up scales them).
time_scale=${BENCH_FLEET_TIME_SCALE:-100000}
read -r -a up_flags <<<"${BENCH_FLEET_UP_FLAGS:-}"

say() { printf '[%s] bench-fleet: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v psql >/dev/null || { say "ERROR: psql is missing (apt-get install postgresql-client)"; exit 1; }
for b in hyperfleet-dev hyperfleet-api fleet-bench; do
	[ -x "$bin/$b" ] || { say "ERROR: no $bin/$b: build first (make bench-fleet builds it)"; exit 1; }
done
for b in etcd kube-apiserver; do
	[ -x "$assets/$b" ] || { say "ERROR: no $b in $assets: make k8s-assets (or set KUBEBUILDER_ASSETS)"; exit 1; }
done

db=hf_fleet_$$
base=${pg%%\?*}
base=${base%/*}
query=${pg#*\?}
[ "$query" = "$pg" ] && query=""
url="$base/$db${query:+?$query}"
dev=$(mktemp -d /tmp/hf-fleet.XXXXXX)
up_pid="" # hyperfleet-dev up, in a session of its own (setsid): an interrupt reaches it through cleanup, after the rest

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
		say "stopping the system"
		kill -INT "$up_pid" 2>/dev/null || true
		for _ in $(seq 1 120); do kill -0 "$up_pid" 2>/dev/null || break; sleep 0.5; done
		# Should it hang: the kernel sends its children SIGTERM when it dies (the supervisor sets Pdeathsig).
		kill -KILL "$up_pid" 2>/dev/null || true
		wait "$up_pid" 2>/dev/null || true
	fi
	psql -q "$pg" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	if [ -n "${BENCH_FLEET_KEEP:-}" ]; then
		say "kept the dev dir and its logs: $dev"
	else
		rm -rf "$dev"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "database $db on ${base#*@}; dev dir $dev; ports $port-$((port + 15))"
psql -q "$pg" -c "CREATE DATABASE $db" >/dev/null
p() { echo "127.0.0.1:$((port + $1))"; }
# Three spare workers per cluster in LAX2, tagged as an operator tags them for the provisioner, beside the demo's.
awk -v n="$((3 * n))" 'BEGIN { printf "["; for (i = 1; i <= n; i++) printf "%s{\"deviceId\":%d,\"locationName\":\"LAX2\",\"productId\":576,\"osName\":\"Ubuntu 20.x\",\"powerStatus\":\"ON\",\"spsStatus\":\"IN_USE\",\"tags\":[\"caphv-use=allow\",\"caphvlabel:deviceType=hvWorker\"]}", (i > 1 ? "," : ""), 100000 + i; print "]" }' >"$dev/devices.json"
setsid "$bin/hyperfleet-dev" up --bin-dir "$bin" --dev-dir "$dev" --issuer-dir "$dev/issuer" --color never \
	--db-url "$url" --api-address "$(p 0)" --health-address "$(p 1)" --metrics-address "$(p 2)" \
	--kube-assets "$assets" --kube-address "$(p 3)" --etcd-address "$(p 4)" --hypershift-health-address "$(p 5)" \
	--mc-b-kube-address "$(p 6)" --mc-b-etcd-address "$(p 7)" --mc-b-hypershift-health-address "$(p 8)" \
	--cincinnati-address "$(p 9)" --hivelocity-address "$(p 10)" --version-resolver-ops-address "$(p 11)" \
	--hostedcluster-applier-ops-address "$(p 12)" --hivelocity-provisioner-ops-address "$(p 13)" \
	--cluster-placer-ops-address "$(p 14)" --db-port "$((port + 15))" \
	--max-hosted-clusters "mc-a=$n,mc-b=$n" --hypershift-delay 0 --time-scale "$time_scale" \
	--arg hypershift-sim-mc-a=--deletion-delay=0 --arg hypershift-sim-mc-b=--deletion-delay=0 \
	--arg hivelocity-sim=--seed-file="$dev/devices.json" \
	${up_flags[@]+"${up_flags[@]}"} >"$dev/up.log" 2>&1 &
up_pid=$!

for _ in $(seq 1 600); do
	grep -q "all components ready" "$dev/up.log" 2>/dev/null && break
	kill -0 "$up_pid" 2>/dev/null || { say "ERROR: hyperfleet-dev up ended"; tail -n 40 "$dev/up.log" >&2; exit 1; }
	sleep 0.5
done
grep -q "all components ready" "$dev/up.log" || { say "ERROR: not ready after 5 minutes"; tail -n 40 "$dev/up.log" >&2; exit 1; }
say "system ready; $n clusters, $concurrency creates at once"
# The seed and the adapters' first passes settle before the window opens.
sleep 3

"$bin/fleet-bench" --dev-dir "$dev" --url "http://$(p 0)" --hivelocity-url "http://$(p 10)" \
	--clusters "$n" --concurrency "$concurrency" --timeout "$timeout" --prefix "fleet-$$"
