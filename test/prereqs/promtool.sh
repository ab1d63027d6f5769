#!/usr/bin/env bash
# The alert rules (deploy/alerts) are checked and unit-tested with promtool by test/deploy. Run before any test by
# `make test`: it finds promtool on PATH; as root with apt it installs Debian's prometheus package, which ships it
# (the server it also ships is not started: these machines do not run systemd, and nothing here needs it);
# otherwise it stops with the one command to run.
set -euo pipefail

say() { printf 'prereqs: %s\n' "$*" >&2; }
instruction="install it with: sudo apt-get install -y prometheus"

if tool=$(command -v promtool 2>/dev/null); then
	say "promtool for the alert rules' tests: $tool"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	say "ERROR: the alert rules' tests need promtool, and it is not on PATH; $instruction"
	exit 1
fi
say "no promtool on PATH; installing Debian's prometheus package for the alert rules' tests (apt-get install -y prometheus)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q >&2 || ! apt-get install -y -q --no-install-recommends prometheus </dev/null >&2; then
	say "ERROR: apt-get could not install prometheus (see above); $instruction"
	exit 1
fi
if ! tool=$(command -v promtool 2>/dev/null); then
	say "ERROR: apt-get installed prometheus, but promtool is not on PATH; $instruction"
	exit 1
fi
say "installed $tool"
