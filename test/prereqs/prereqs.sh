#!/usr/bin/env bash
# What `make test` needs beyond Go and what the tests provision themselves (a PostgreSQL: test/harness; etcd and
# kube-apiserver: make k8s-assets): a headless Chromium, which test/integration/ui_test.go runs to render the
# Swagger UI. Run before any test, it finds the browser under the names that test looks for; as root with apt it
# installs Debian's chromium; otherwise it stops with the one command to run, so that no test run fails halfway
# for want of it.
set -euo pipefail

say() { printf 'prereqs: %s\n' "$*" >&2; }

# The names test/integration/ui_test.go looks up on PATH, in its order.
browsers=(chromium chromium-browser)

find_browser() {
	local name
	for name in "${browsers[@]}"; do
		if command -v "$name" >/dev/null 2>&1; then
			command -v "$name"
			return 0
		fi
	done
	return 1
}

instruction="install it with: sudo apt-get install -y chromium"

if browser=$(find_browser); then
	say "headless Chromium for the Swagger UI test: $browser"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	say "ERROR: the Swagger UI test needs headless Chromium, and none is on PATH (looked for ${browsers[*]}); $instruction"
	exit 1
fi
say "no Chromium on PATH; installing Debian's chromium for the Swagger UI test (apt-get install -y chromium)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q >&2 || ! apt-get install -y -q chromium </dev/null >&2; then
	say "ERROR: apt-get could not install chromium (see above); $instruction"
	exit 1
fi
if ! browser=$(find_browser); then
	say "ERROR: apt-get installed chromium, but it is not on PATH; $instruction"
	exit 1
fi
say "installed $browser"
