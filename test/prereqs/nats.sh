#!/usr/bin/env bash
# The change feed's relay tests publish to a real NATS server with JetStream on 127.0.0.1:4222 (no in-memory
# fake). Run before any test by `make test`: if nothing answers there, as root it starts Debian's nats-server (the
# way these machines run it, installing the package first if needed); otherwise it stops with the command to run.
set -euo pipefail

say() { printf 'prereqs: %s\n' "$*" >&2; }
addr=${HYPERFLEET_TEST_NATS_ADDR:-127.0.0.1:4222}
host=${addr%:*}
port=${addr##*:}
store=${HYPERFLEET_TEST_NATS_STORE:-/var/lib/nats-server}
start="start-stop-daemon --start --oknodo --background --make-pidfile --pidfile $store/nats-server.pid --exec /usr/sbin/nats-server -- -a $host -p $port -js -sd $store"

answers() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

if answers; then
	say "NATS (JetStream) for the relay tests: $addr"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	say "ERROR: the relay tests need NATS with JetStream on $addr, and nothing answers there; start it as root with: $start"
	exit 1
fi
if [ ! -x /usr/sbin/nats-server ]; then
	say "installing Debian's nats-server for the relay tests"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2 && apt-get install -y -q nats-server </dev/null >&2 ||
		{ say "ERROR: apt-get could not install nats-server (see above)"; exit 1; }
fi
mkdir -p "$store"
say "starting NATS with JetStream on $addr: $start"
$start
for _ in $(seq 1 50); do
	if answers; then
		say "NATS answers on $addr"
		exit 0
	fi
	sleep 0.2
done
say "ERROR: nats-server did not answer on $addr within 10 s; try: $start"
exit 1
