#!/usr/bin/env bash
# The image test (test/image) builds the HyperFleet image and runs it, so `make test` needs a Docker engine. Run
# before any test: if none answers, as root it installs Debian's docker.io when missing and starts dockerd the way
# .ci/run does (vfs storage, detached, log in /var/log/dockerd.log); otherwise it stops with the command to run.
set -euo pipefail

say() { printf 'prereqs: %s\n' "$*" >&2; }
start="nohup dockerd --storage-driver=vfs </dev/null >>/var/log/dockerd.log 2>&1 &"

if docker info >/dev/null 2>&1; then
	say "Docker for the image test: $(docker version -f '{{.Server.Version}}' 2>/dev/null)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	say "ERROR: the image test needs a Docker engine, and none answers; as root: apt-get install -y docker.io && $start"
	exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
	say "installing Debian's docker.io for the image test"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2 && apt-get install -y -q docker.io </dev/null >&2 ||
		{ say "ERROR: apt-get could not install docker.io (see above)"; exit 1; }
fi
say "starting dockerd (vfs storage driver; log in /var/log/dockerd.log)"
# Detached from this script's stdio so that make does not wait for it: it outlives the run, as a service would.
nohup dockerd --storage-driver=vfs </dev/null >>/var/log/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
	if docker info >/dev/null 2>&1; then
		say "Docker $(docker version -f '{{.Server.Version}}' 2>/dev/null) answers"
		exit 0
	fi
	sleep 1
done
tail -n 20 /var/log/dockerd.log >&2 || true
say "ERROR: dockerd did not answer within 60 s (log above)"
exit 1
