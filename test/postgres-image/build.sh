#!/usr/bin/env bash
# Builds the hyperfleet/postgres:15 image that the test harness (test/harness) runs with testcontainers.
#
# Our build and CI machines reach Debian's apt mirror but no container registry, so the image cannot be pulled
# or built FROM anything: it is a Debian bookworm root filesystem made by debootstrap with PostgreSQL 15 in it,
# imported with `docker import`, and entrypoint.sh (beside this file) in place of the official image's entrypoint.
#
# Usage (as root, with a running Docker engine and debootstrap installed):
#   test/postgres-image/build.sh            # build unless an image from this exact recipe already exists
#   test/postgres-image/build.sh --force    # rebuild anyway
# then: export HYPERFLEET_TEST_POSTGRES_IMAGE=hyperfleet/postgres:15
#
# Environment:
#   HYPERFLEET_POSTGRES_IMAGE  image name to build (default hyperfleet/postgres:15)
#   HYPERFLEET_CACHE_DIR       where downloaded packages and the work dir live (default /var/cache/hyperfleet);
#                              kept outside the clone so the clone stays clean and the .debs survive re-clones
#   HYPERFLEET_DEBIAN_MIRROR   Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

image=${HYPERFLEET_POSTGRES_IMAGE:-hyperfleet/postgres:15}
cache_dir=${HYPERFLEET_CACHE_DIR:-/var/cache/hyperfleet}
mirror=${HYPERFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
entrypoint=/usr/local/bin/hyperfleet-postgres-entrypoint
recipe_label=org.hyperfleet.recipe

log() { printf '[%s] postgres-image: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

force=false
case "${1:-}" in
--force) force=true ;;
"") ;;
*) die "unknown argument $1 (usage: $0 [--force])" ;;
esac

[ "$(id -u)" = 0 ] || die "must run as root: debootstrap needs chroot"
command -v docker >/dev/null || die "docker CLI not found (apt-get install -y docker.io)"
command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install -y debootstrap)"
docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info' (start one, e.g. dockerd --storage-driver=vfs &)"

# The recipe hash is stored as an image label: editing this script or the entrypoint rebuilds the image, while
# an unchanged recipe reuses it. Hash contents only, so the clone's location does not matter.
recipe=$(cat "$here/build.sh" "$here/entrypoint.sh" | sha256sum | cut -c1-16)
if ! $force; then
	have=$(docker image inspect -f "{{ index .Config.Labels \"$recipe_label\" }}" "$image" 2>/dev/null || true)
	if [ "$have" = "$recipe" ]; then
		log "$image is up to date (recipe $recipe); nothing to do"
		exit 0
	fi
	if [ -n "$have" ]; then
		log "$image was built from recipe $have, current recipe is $recipe: rebuilding"
	fi
fi

debs=$cache_dir/debootstrap-debs
work=$cache_dir/postgres-image
rootfs=$work/rootfs
mkdir -p "$debs" "$work"

# debootstrap mounts /proc and /sys inside the target and may leave them mounted if it fails; unmount before
# deleting, and delete with --one-file-system so a leftover mount can never take the host's files with it.
remove_rootfs() {
	[ -e "$rootfs" ] || return 0
	awk -v root="$rootfs/" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount -l "$m" || true; done
	rm -rf --one-file-system "$rootfs"
}
trap remove_rootfs EXIT
remove_rootfs

started=$SECONDS
log "debootstrap bookworm with postgresql-15 into $rootfs (packages cached in $debs)"
if ! debootstrap --variant=minbase --include=postgresql-15 --cache-dir="$debs" \
	bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
	tail -n 30 "$work/debootstrap.log" >&2 || true
	[ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
	die "debootstrap failed; full log in $work/debootstrap.log"
fi
log "debootstrap done in $((SECONDS - started))s"

# Slimming matters beyond disk space: with the vfs storage driver every container start copies the whole image,
# so each megabyte removed here is copied once less per test package.
# - The cluster that the Debian package creates on install: the entrypoint makes its own in $PGDATA.
# - LLVM, its z3 dependency and the JIT bitcode (~150 MB): without llvmjit.so the server runs with JIT
#   unavailable, which tests do not miss.
# - Perl and the locale sources (only postgresql-common's wrapper scripts and locale-gen use them; the
#   entrypoint calls the server binaries directly and uses the built-in C.UTF-8 locale), apt's state,
#   documentation, manuals and message translations.
rm -rf --one-file-system \
	"$rootfs"/var/lib/postgresql/15 "$rootfs"/etc/postgresql/15 \
	"$rootfs"/usr/lib/postgresql/15/lib/llvmjit* "$rootfs"/usr/lib/postgresql/15/lib/bitcode \
	"$rootfs"/usr/lib/x86_64-linux-gnu/libLLVM* "$rootfs"/usr/lib/x86_64-linux-gnu/libz3.* \
	"$rootfs"/usr/share/perl "$rootfs"/usr/lib/x86_64-linux-gnu/perl "$rootfs"/usr/lib/x86_64-linux-gnu/libperl.* \
	"$rootfs"/usr/share/i18n \
	"$rootfs"/var/cache/apt "$rootfs"/var/lib/apt/lists "$rootfs"/var/cache/debconf/*-old \
	"$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/usr/share/info "$rootfs"/usr/share/locale \
	"$rootfs"/usr/share/postgresql/15/man
install -m 0755 "$here/entrypoint.sh" "$rootfs$entrypoint"
# Smoke test inside the chroot, so a broken root filesystem fails here rather than as a container that never
# gets ready.
chroot "$rootfs" /usr/lib/postgresql/15/bin/postgres --version >/dev/null || die "postgres does not run in $rootfs"
log "root filesystem is $(du -sh --one-file-system "$rootfs" | cut -f1)"

log "importing $image"
old_id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
tar --numeric-owner -C "$rootfs" -c . | docker import \
	-c "ENTRYPOINT [\"$entrypoint\"]" \
	-c 'CMD ["postgres"]' \
	-c 'EXPOSE 5432' \
	-c 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	-c 'ENV PGDATA=/var/lib/postgresql/data' \
	-c 'ENV LANG=C.UTF-8' \
	-c "LABEL $recipe_label=$recipe" \
	- "$image" >/dev/null
# The previous build would linger as an untagged image of ~150 MB; a container still using it keeps it.
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
	docker image rm "$old_id" >/dev/null 2>&1 || log "kept previous image $old_id: a container still uses it"
fi
log "built $image (recipe $recipe) in $((SECONDS - started))s"
