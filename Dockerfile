# One image with every HyperFleet binary in /usr/local/bin: static (CGO_ENABLED=0), on scratch, running as
# 65532:65532. The API is the default; a Deployment picks another binary with `command:` (Docker: --entrypoint):
#   docker build -t hyperfleet/hyperfleet .
#   docker run hyperfleet/hyperfleet migrate --db-url …            # hyperfleet-api migrate
#   docker run --entrypoint /usr/local/bin/version-resolver hyperfleet/hyperfleet --api-url http://api:8000 …
#
# BuildKit (the default builder since Docker 23) is needed for the cache mounts, which keep Go's module and build
# caches between builds: a code change recompiles only what changed. GO_IMAGE is the builder, the official image
# by default; `make image` (deploy/build-image.sh) passes a local one made from the host's Go toolchain where no
# registry is reachable. A builder needs go, a POSIX shell and /etc/ssl/certs/ca-certificates.crt.
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOCACHE=/cache/go-build GOMODCACHE=/cache/mod
# The module proxy the host uses (deploy/build-image.sh passes `go env GOPROXY`); empty means Go's default.
ARG GOPROXY
COPY . .
ARG VERSION=dev
ARG BUILD=unknown
ARG BUILD_TIME=
# hyperfleet-dev is left out: it runs kube-apiserver and etcd from a developer's cache, which no pod has.
# -s -w drops the symbol table and DWARF (about 30 % of the size); panics keep their stack traces.
RUN --mount=type=cache,target=/cache/mod --mount=type=cache,target=/cache/go-build \
    set -eu; \
    if [ -z "${GOPROXY:-}" ]; then unset GOPROXY; fi; \
    pkgs=$(go list -e ./cmd/... | grep -v '/cmd/hyperfleet-dev$'); \
    mkdir -p /rootfs/usr/local/bin /rootfs/etc/ssl/certs /rootfs/tmp /home-nonroot; \
    go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/hyperfleet/hyperfleet/internal/command.version=${VERSION} -X github.com/hyperfleet/hyperfleet/internal/command.build=${BUILD} -X github.com/hyperfleet/hyperfleet/internal/command.buildTime=${BUILD_TIME}" \
        -o /rootfs/usr/local/bin/ $pkgs; \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
        >/rootfs/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group; \
    printf 'hosts: files dns\n' >/rootfs/etc/nsswitch.conf; \
    chmod 1777 /rootfs/tmp

FROM scratch
COPY --from=build /rootfs/ /
# The CLI keeps its configuration under $HOME; nothing else writes anywhere but /tmp.
COPY --from=build --chown=65532:65532 /home-nonroot /home/nonroot
USER 65532:65532
# An image is for deployments: production defaults (listeners on every interface rather than loopback, the database
# certificate verified, per-identity rate limits; no embedded database, no development tokens, and no serving
# without --enable-jwt, or --insecure-no-auth on loopback: test/deploy checks both).
ENV HOME=/home/nonroot HYPERFLEET_ENV=production
# API, health (/healthz, /readyz), metrics.
EXPOSE 8000 8080 9090
ENTRYPOINT ["/usr/local/bin/hyperfleet-api"]
CMD ["serve"]
