#!/usr/bin/env bash
# Builds the Kubernetes test binaries envtest needs (etcd and kube-apiserver) from the Go module proxy into a
# cache outside the clone, and prints the directory to use as KUBEBUILDER_ASSETS. It returns at once when both are
# there. setup-envtest cannot be used here: the release buckets it downloads from are not reachable.
#
# The wrapper modules beside this script pin what is built (their go.sum is committed):
#   etcd/            go.etcd.io/etcd/server/v3 etcdmain.Main
#   kube-apiserver/  k8s.io/kubernetes cmd/kube-apiserver/app, with every k8s.io staging module replaced by its
#                    published v0.x version (kubernetes' own go.mod points them at ./staging)
#
# Environment: HYPERFLEET_K8S_ASSETS overrides the directory; XDG_CACHE_HOME moves the default.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=1.37.2
dir=${HYPERFLEET_K8S_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/k8s/$version}

build() {
	local name=$1 estimate=$2 started=$SECONDS
	[ -x "$dir/$name" ] && return 0
	printf 'k8s-assets: building %s from source modules into %s (cold: about %s on 2 cores; cached afterwards)\n' \
		"$name" "$dir" "$estimate" >&2
	# A build in the background with a progress line every 30 s, so a long cold build is visibly alive.
	(cd "$here/$name" && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 \
		go build -trimpath -ldflags '-s -w' -o "$dir/.$name.partial" .) &
	local pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 5
		if (( (SECONDS - started) % 30 < 5 )) && kill -0 "$pid" 2>/dev/null; then
			printf 'k8s-assets: still building %s (%ds)\n' "$name" $((SECONDS - started)) >&2
		fi
	done
	wait "$pid"
	mv "$dir/.$name.partial" "$dir/$name"
	printf 'k8s-assets: built %s in %ds\n' "$name" $((SECONDS - started)) >&2
}

mkdir -p "$dir"
build etcd "4 min"
build kube-apiserver "6-25 min"
echo "$dir"
