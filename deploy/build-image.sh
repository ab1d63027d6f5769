#!/usr/bin/env bash
# Builds the HyperFleet image (the Dockerfile at the root of the repository) without pulling anything.
#
# The Dockerfile's builder defaults to the official golang image. Our machines reach no container registry, so
# unless GO_IMAGE names another builder this script first makes a local one from what the machine already has:
# the host's Go toolchain (statically linked, copied as it is), a static busybox from Debian's apt for the shell the
# build steps need, and the host's CA bundle, put together with `docker import`. It is made once per recipe (this
# script, the Go version, the busybox package and the CA bundle; kept as an image label) and reused after that.
#
# Usage: deploy/build-image.sh
# Environment:
#   IMAGE                 image to build (default hyperfleet/hyperfleet:dev)
#   VERSION, BUILD        stamped into the binaries (default: git describe, short commit)
#   BUILD_TIME            stamped too (default: the commit's time, UTC, so the same commit builds the same image)
#   GO_IMAGE              builder image to use instead of the local one, e.g. golang:1.26-bookworm
#   HYPERFLEET_CACHE_DIR  where the busybox package and the builder's staging dirs live, outside the clone
#                         (default ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
image=${IMAGE:-hyperfleet/hyperfleet:dev}
cache_dir=${HYPERFLEET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet}
recipe_label=org.hyperfleet.recipe

log() { printf '[%s] image: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# The Dockerfile's cache mounts need BuildKit. A CLI with the buildx plugin uses it by default, and CLIs before 23.0
# have it built in (DOCKER_BUILDKIT=1); a newer CLI without buildx has only the legacy builder. Some of our machines
# have such a CLI on PATH before Debian's docker.io one (20.10), so look further than PATH's first.
pick_docker() {
	local cli major
	for cli in ${DOCKER:-} docker /usr/bin/docker; do
		command -v "$cli" >/dev/null || continue
		if "$cli" buildx version >/dev/null 2>&1; then
			echo "$cli"
			return
		fi
		major=$("$cli" version -f '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)
		if [[ $major =~ ^[0-9]+$ ]] && [ "$major" -lt 23 ]; then
			echo "$cli"
			return
		fi
	done
	return 1
}
command -v docker >/dev/null || [ -x /usr/bin/docker ] || die "docker CLI not found (apt-get install -y docker.io)"
docker=$(pick_docker) ||
	die "no docker CLI here can use BuildKit: install the buildx plugin, or Debian's docker.io (/usr/bin/docker), or set DOCKER"
"$docker" info >/dev/null 2>&1 ||
	die "no Docker engine answers 'docker info' (start one, e.g. dockerd --storage-driver=vfs &; .ci/run does)"
export DOCKER_BUILDKIT=1

version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
build=${BUILD:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
build_time=${BUILD_TIME:-$(TZ=UTC git -C "$root" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || true)}

# local_builder makes (or finds) the builder image from the host's toolchain and prints its name.
local_builder() {
	command -v go >/dev/null || die "no Go toolchain on PATH to build the local builder from"
	command -v apt-get >/dev/null || die "the local builder needs Debian's apt for busybox; or set GO_IMAGE=golang:1.26-bookworm"
	local goroot goversion ca=/etc/ssl/certs/ca-certificates.crt name have deb recipe started=$SECONDS
	goroot=$(go env GOROOT)
	goversion=$(go env GOVERSION)
	name=hyperfleet/go-builder:$goversion
	[ -s "$ca" ] || die "no CA bundle at $ca (apt-get install -y ca-certificates)"
	# The Go toolchain must run in an image with no libc.
	if ! file_is_static "$goroot/bin/go"; then
		die "$goroot/bin/go is dynamically linked; use an official Go release, or set GO_IMAGE"
	fi

	mkdir -p "$cache_dir/debs"
	deb=$(find "$cache_dir/debs" -maxdepth 1 -name 'busybox-static_*.deb' | sort | tail -n 1)
	if [ -z "$deb" ]; then
		log "apt-get download busybox-static into $cache_dir/debs"
		(cd "$cache_dir/debs" && apt-get download busybox-static >/dev/null 2>&1) ||
			die "apt-get download busybox-static failed (run apt-get update first)"
		deb=$(find "$cache_dir/debs" -maxdepth 1 -name 'busybox-static_*.deb' | sort | tail -n 1)
	fi

	recipe=$( (cat "${BASH_SOURCE[0]}" "$ca"; echo "$goversion $goroot $(basename "$deb")") | sha256sum | cut -c1-16)
	have=$("$docker" image inspect -f "{{ index .Config.Labels \"$recipe_label\" }}" "$name" 2>/dev/null || true)
	if [ "$have" = "$recipe" ]; then
		echo "$name"
		return
	fi

	log "making the builder $name from $goroot, $(basename "$deb") and $ca"
	# A directory of its own, so that a `make image` and test/image building at the same time do not share one.
	local stage
	stage=$(mktemp -d "$cache_dir/go-builder.XXXXXX")
	# local_builder runs in $(…), so this is the subshell's trap: the stage goes however the function ends. The path
	# is expanded now, as the local variable is gone by then.
	# shellcheck disable=SC2064
	trap "rm -rf $(printf %q "$stage")" EXIT
	mkdir -p "$stage/rootfs"/{bin,etc/ssl/certs,tmp,root,go,usr/local}
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$stage" ./bin/busybox
	mv "$stage/bin/busybox" "$stage/rootfs/bin/busybox"
	local applet
	for applet in $("$stage/rootfs/bin/busybox" --list); do
		[ "$applet" = busybox ] || ln -s busybox "$stage/rootfs/bin/$applet"
	done
	chmod 1777 "$stage/rootfs/tmp"
	cp "$ca" "$stage/rootfs/etc/ssl/certs/ca-certificates.crt"
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/rootfs/etc/passwd"
	printf 'root:x:0:\n' >"$stage/rootfs/etc/group"
	printf 'hosts: files dns\n' >"$stage/rootfs/etc/nsswitch.conf"
	# The toolchain's own test suite (a tenth of it) never runs here.
	tar -C "$goroot" --exclude=./test -c . | (mkdir -p "$stage/rootfs/usr/local/go" && tar -C "$stage/rootfs/usr/local/go" -x)

	local old_id
	old_id=$("$docker" image inspect -f '{{.Id}}' "$name" 2>/dev/null || true)
	# The same environment as the official image, so the Dockerfile cannot tell them apart.
	tar --numeric-owner -C "$stage/rootfs" -c . | "$docker" import \
		-c 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENV GOPATH=/go' \
		-c 'ENV GOTOOLCHAIN=local' \
		-c 'WORKDIR /go' \
		-c "LABEL $recipe_label=$recipe" \
		- "$name" >/dev/null
	if [ -n "$old_id" ] && [ "$old_id" != "$("$docker" image inspect -f '{{.Id}}' "$name")" ]; then
		"$docker" image rm "$old_id" >/dev/null 2>&1 || true
	fi
	log "made $name in $((SECONDS - started))s"
	echo "$name"
}

# file_is_static says whether an ELF executable has no program interpreter, i.e. needs no libc.
file_is_static() {
	! LC_ALL=C grep -aqm1 'ld-linux' <(head -c 4096 "$1")
}

go_image=${GO_IMAGE:-}
if [ -z "$go_image" ]; then
	go_image=$(local_builder)
fi

started=$SECONDS
log "building $image ($version, $build) with builder $go_image"
old_id=$("$docker" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
"$docker" build --progress=plain \
	--build-arg "GO_IMAGE=$go_image" --build-arg "VERSION=$version" --build-arg "BUILD=$build" --build-arg "BUILD_TIME=$build_time" \
	--build-arg "GOPROXY=$(go env GOPROXY 2>/dev/null || true)" \
	--label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.revision=$build" \
	-t "$image" "$root" >&2
# Each build with changed code leaves the previous image untagged; a container still using it keeps it.
if [ -n "$old_id" ] && [ "$old_id" != "$("$docker" image inspect -f '{{.Id}}' "$image")" ]; then
	"$docker" image rm "$old_id" >/dev/null 2>&1 || true
fi
log "built $image in $((SECONDS - started))s: $("$docker" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}')"
