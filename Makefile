# HyperFleet — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BUILD     ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The commit's time, not the clock's: the same commit builds the same binaries, and the build cache keeps them.
BUILD_TIME ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
# Every binary reads its version, build and build time from internal/command (GET /api/hyperfleet/metadata).
LDFLAGS   := -X github.com/hyperfleet/hyperfleet/internal/command.version=$(VERSION) -X github.com/hyperfleet/hyperfleet/internal/command.build=$(BUILD) \
	-X github.com/hyperfleet/hyperfleet/internal/command.buildTime=$(BUILD_TIME)
GOTEST    ?= go test
# Tools are built once into a cache outside the clone.
TOOLS_DIR ?= $(HOME)/.cache/hyperfleet/tools
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# The adapters whose reports make a resource Ready in `make run` (see README, "How adapters report").
# The placer and the applier both report on a cluster (where it is placed, and its HostedCluster); the applier also
# reports on each management cluster (reachable, capacity), which the placer reads.
REQUIRED_ADAPTERS ?= versionstream=version-resolver;cluster=cluster-placer,hostedcluster-applier;nodepool=hivelocity-provisioner;managementcluster=hostedcluster-applier
# Where `hyperfleet-api token` keeps the development signing key (its default, spelled out for serve).
DEV_ISSUER_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hyperfleet/dev-issuer
DEV_AUTH_FLAGS := --enable-jwt --enable-authz --jwk-cert-file $(DEV_ISSUER_DIR)/dev-jwks.json \
	--jwt-issuer hyperfleet-dev --jwt-audience hyperfleet

DB_CONTAINER ?= hyperfleet-db
DB_IMAGE     ?= hyperfleet/postgres:15
DB_PORT      ?= 5434

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_\/-]+:.*##/ {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every binary into bin/
	@mkdir -p $(BIN)
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

.PHONY: install
install: ## Install the binaries into $GOPATH/bin
	go install -ldflags "$(LDFLAGS)" ./cmd/...

# Development system: `hyperfleet-dev up` supervises PostgreSQL (embedded, unless DB_URL names one), the API, two
# management clusters mc-a and mc-b (a kube-apiserver and a HyperShift simulator each; the kube binaries built first
# when missing), the Cincinnati and Hivelocity simulators and the four adapters: dependency order, health checks,
# restarts, prefixed logs; Ctrl-C stops them all. Every listener is a variable, and what talks to it follows. State
# (tokens, etcd, kubeconfigs in DEV_DIR/management-clusters, simulators, logs) stays in DEV_DIR.
DEV_DIR             ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hyperfleet/dev
DB_URL              ?=
EMBEDDED_DB_DIR     ?=
EMBEDDED_DB_PORT    ?= 5433
API_ADDR            ?= 127.0.0.1:8000
HEALTH_ADDR         ?= 127.0.0.1:8080
METRICS_ADDR        ?= 127.0.0.1:9090
# mc-a's kube-apiserver, etcd and HyperShift simulator, then mc-b's.
KUBE_ADDR           ?= 127.0.0.1:6443
ETCD_ADDR           ?= 127.0.0.1:2379
HYPERSHIFT_SIM_ADDR ?= 127.0.0.1:9600
MC_B_KUBE_ADDR           ?= 127.0.0.1:6444
MC_B_ETCD_ADDR           ?= 127.0.0.1:2381
MC_B_HYPERSHIFT_SIM_ADDR ?= 127.0.0.1:9601
CINCINNATI_SIM_ADDR ?= 127.0.0.1:9400
HIVELOCITY_SIM_ADDR ?= 127.0.0.1:9500
VERSION_RESOLVER_ADDR       ?= 127.0.0.1:8091
HOSTEDCLUSTER_APPLIER_ADDR  ?= 127.0.0.1:8092
HIVELOCITY_PROVISIONER_ADDR ?= 127.0.0.1:8093
CLUSTER_PLACER_ADDR         ?= 127.0.0.1:8094
# Hivelocity's 10-minute reload takes 10 s at 60; hyperfleet-dev up --help lists the other knobs (UP_FLAGS).
SIM_TIME_SCALE ?= 60
UP_FLAGS       ?=
define dev_up
	$(BIN)/hyperfleet-dev up --bin-dir $(BIN) --dev-dir $(DEV_DIR) --issuer-dir $(DEV_ISSUER_DIR) \
	  --required-adapters '$(REQUIRED_ADAPTERS)' $(if $(DB_URL),--db-url '$(DB_URL)') \
	  $(if $(EMBEDDED_DB_DIR),--db-dir $(EMBEDDED_DB_DIR)) --db-port $(EMBEDDED_DB_PORT) \
	  --api-address $(API_ADDR) --health-address $(HEALTH_ADDR) --metrics-address $(METRICS_ADDR) \
	  --kube-assets $(K8S_ASSETS_DIR) --kube-assets-build cmd/hyperfleet-dev/k8sassets/build.sh \
	  --kube-address $(KUBE_ADDR) --etcd-address $(ETCD_ADDR) --hypershift-health-address $(HYPERSHIFT_SIM_ADDR) \
	  --mc-b-kube-address $(MC_B_KUBE_ADDR) --mc-b-etcd-address $(MC_B_ETCD_ADDR) \
	  --mc-b-hypershift-health-address $(MC_B_HYPERSHIFT_SIM_ADDR) --time-scale $(SIM_TIME_SCALE) \
	  --cincinnati-address $(CINCINNATI_SIM_ADDR) --hivelocity-address $(HIVELOCITY_SIM_ADDR) \
	  --version-resolver-ops-address $(VERSION_RESOLVER_ADDR) \
	  --hostedcluster-applier-ops-address $(HOSTEDCLUSTER_APPLIER_ADDR) \
	  --hivelocity-provisioner-ops-address $(HIVELOCITY_PROVISIONER_ADDR) \
	  --cluster-placer-ops-address $(CLUSTER_PLACER_ADDR) $(1) $(UP_FLAGS)
endef

.PHONY: run
run: build ## Run the whole system (database, API with dev tokens, two management clusters, simulators, adapters), supervised; Ctrl-C stops it
	$(call dev_up,)

.PHONY: run-no-auth
run-no-auth: build ## The same without authentication (every caller is an admin)
	$(call dev_up,--auth=false)

.PHONY: run-api
run-api: build ## Run the API alone (embedded PostgreSQL unless DB_URL, development tokens)
	$(BIN)/hyperfleet-api serve $(if $(DB_URL),--db-url '$(DB_URL)',--embedded-db $(if $(EMBEDDED_DB_DIR),--embedded-db-dir $(EMBEDDED_DB_DIR)) \
	  --embedded-db-port $(EMBEDDED_DB_PORT)) --api-server-bindaddress $(API_ADDR) --health-server-bindaddress $(HEALTH_ADDR) \
	  --metrics-server-bindaddress $(METRICS_ADDR) $(DEV_AUTH_FLAGS) --required-adapters '$(REQUIRED_ADAPTERS)'

# The Kubernetes test binaries (etcd, kube-apiserver) the applier's tests run, built from the Go module proxy into a
# cache outside the clone: setup-envtest cannot download here. A cold build takes 6–25 min, then it returns at once.
K8S_ASSETS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hyperfleet/k8s/1.37.2

.PHONY: k8s-assets
k8s-assets: ## Build kube-apiserver and etcd for envtest into ~/.cache/hyperfleet/k8s (once; prints the directory)
	@HYPERFLEET_K8S_ASSETS=$(K8S_ASSETS_DIR) cmd/hyperfleet-dev/k8sassets/build.sh

# A package's tests may take longer than go test's default 10 minutes on a busy 2-core machine (the integration
# package runs hundreds of API servers, the image test builds an image on a cold cache); a hang still ends.
TEST_TIMEOUT ?= 30m

# The Hivelocity claim race runs again and again: exactly-once must hold on every interleaving it meets.
CLAIM_RACE_RUNS ?= 10

# What the tests need beyond Go that they cannot provide themselves (headless Chromium, a NATS server with
# JetStream for the relay tests, a Docker engine for the image test, promtool for the alert rules' tests), checked
# before any test runs: found, installed with apt when running as root, or one instruction. The database needs
# nothing here: test/harness uses HYPERFLEET_TEST_DATABASE_URL, a container, or the local PostgreSQL on 127.0.0.1:5432.
.PHONY: test-prereqs
test-prereqs: ## Find (as root: install or start) what the tests need beyond Go: headless Chromium, NATS with JetStream, Docker, promtool
	@test/prereqs/prereqs.sh
	@test/prereqs/nats.sh
	@test/prereqs/docker.sh
	@test/prereqs/promtool.sh

# The alert rules' tests alone (make test runs them with the rest of test/deploy): promtool check and test rules on
# deploy/alerts, the PrometheusRule equal to the plain rules file, every alert tested both ways, documented, and
# reading metrics that exist.
.PHONY: test-alerts
test-alerts: ## Test the alert rules (deploy/alerts) with promtool, and that both copies and deploy/README.md agree
	@test/prereqs/promtool.sh
	$(GOTEST) -count=1 -run '^TestAlert' ./test/deploy

.PHONY: test
test: test-prereqs k8s-assets ## Run all tests (unit + integration, with the race detector) against real PostgreSQL and a real kube-apiserver
	KUBEBUILDER_ASSETS=$(K8S_ASSETS_DIR) $(GOTEST) -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GOTEST) -race -count=$(CLAIM_RACE_RUNS) -timeout $(TEST_TIMEOUT) -run '^TestHivelocityClaimsAreExactlyOnceAcrossReplicas$$' ./test/integration

.PHONY: test-integration
test-integration: k8s-assets ## Run the integration tests only
	KUBEBUILDER_ASSETS=$(K8S_ASSETS_DIR) $(GOTEST) -race -count=1 -timeout $(TEST_TIMEOUT) ./test/...

# The API of `make run` checks tokens, so bench mints a development admin token with the same issuer (admin, as
# the status phases report as several adapters) unless HYPERFLEET_TOKEN holds one. Against another API:
# make bench BENCH_URL=… HYPERFLEET_TOKEN=…; BENCH_FLAGS adds flags (bin/hyperfleet-load --help).
BENCH_URL   ?= http://127.0.0.1:8000
BENCH_FLAGS ?=

.PHONY: bench
bench: build ## Load-test a running API (make run's, with a minted token): create, get, list and search throughput and latency
	@if [ -z "$$HYPERFLEET_TOKEN" ]; then \
	  HYPERFLEET_TOKEN=$$($(BIN)/hyperfleet-api token --dir $(DEV_ISSUER_DIR) --subject hyperfleet-load --roles admin 2>/dev/null) || \
	    { echo "bench: cannot mint a development token (bin/hyperfleet-api token); set HYPERFLEET_TOKEN" >&2; exit 1; }; \
	  export HYPERFLEET_TOKEN; \
	fi; \
	$(BIN)/hyperfleet-load --url $(BENCH_URL) $(BENCH_FLAGS)

# The API against the same statements run raw through pgbench, on a fresh database of BENCH_PG, in one run
# (test/bench/limit.sh says what each phase runs; BENCH_CLIENTS, BENCH_CLUSTERS, BENCH_REQUESTS, BENCH_SECONDS).
.PHONY: bench-limit
bench-limit: build ## Measure the API as a share of raw PostgreSQL (pgbench) per request kind, and its and PostgreSQL's CPU per request (BENCH_BUILDS, BENCH_RUNS, BENCH_PHASES)
	BIN=$(BIN) test/bench/limit.sh

# Tenancy's cost: the API's CPU per request (create, get, list, search) with --tenant-claim against without, JWT on
# in both, on fresh databases of BENCH_PG, BENCH_RUNS interleaved runs each (test/bench/tenancy.sh).
.PHONY: bench-tenancy
bench-tenancy: build ## Measure the API's CPU per request with tenancy on versus off (median of interleaved runs)
	BIN=$(BIN) test/bench/tenancy.sh

# The whole loop's cost per cluster: `make run`'s system (two real kube-apiservers, every simulator at zero delay) on
# a fresh database of BENCH_PG and ports from BENCH_FLEET_PORT (27000), BENCH_FLEET_N clusters with a 3-device node
# pool each created at once, all Ready, all deleted, all gone; one markdown table (test/bench/fleet.sh says more).
BENCH_FLEET_N ?= 200

.PHONY: bench-fleet
bench-fleet: build k8s-assets ## Measure one cluster's life through the whole loop (BENCH_FLEET_N clusters with 3-device pools): times, API CPU and requests, Hivelocity and kube calls, peak RSS
	go build -o $(BIN)/fleet-bench ./test/bench/fleet
	BIN=$(BIN) BENCH_FLEET_N=$(BENCH_FLEET_N) KUBEBUILDER_ASSETS=$(K8S_ASSETS_DIR) test/bench/fleet.sh

.PHONY: bench-scale
bench-scale: build ## Measure request latency at 1,000 and at 100,000 clusters (1,000,000 status rows), one client
	BIN=$(BIN) test/bench/scale.sh

.PHONY: generate
generate: ## Regenerate pkg/api from openapi/openapi.yaml
	go generate ./pkg/api/...

.PHONY: verify
verify: ## Fail if generated code drifts from openapi/openapi.yaml, code is unformatted, or go vet complains
	@tmp=$$(mktemp -d); cp pkg/api/api.gen.go $$tmp/; go generate ./pkg/api/... ; \
	  if ! diff -q $$tmp/api.gen.go pkg/api/api.gen.go >/dev/null; then \
	    cp $$tmp/api.gen.go pkg/api/api.gen.go; rm -rf $$tmp; \
	    echo "pkg/api/api.gen.go is out of date with openapi/openapi.yaml: run 'make generate' and commit" >&2; exit 1; fi; rm -rf $$tmp
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:" $$out >&2; exit 1; fi
	go vet ./...
	go mod verify

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_DIR)
	GOBIN=$(TOOLS_DIR) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/golangci-lint $@

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint
	$(GOLANGCI_LINT) run ./...

.PHONY: secrets
secrets: ## Write development database secrets (for make db/setup) into secrets/
	@mkdir -p secrets
	@printf 'localhost' > secrets/db.host
	@printf '$(DB_PORT)' > secrets/db.port
	@printf 'hyperfleet' > secrets/db.name
	@printf 'postgres' > secrets/db.user
	@printf '' > secrets/db.password
	@echo "wrote secrets/db.{host,port,name,user,password} for the container of make db/setup"

.PHONY: test-image
test-image: ## Build the local PostgreSQL image used by the tests and db/setup (needs Docker)
	test/postgres-image/build.sh

# The container image of the Dockerfile: every binary, static, on scratch. No registry is needed: unless GO_IMAGE
# names a builder (e.g. golang:1.26-bookworm), deploy/build-image.sh makes one from this machine's Go toolchain.
IMAGE ?= hyperfleet/hyperfleet:dev

.PHONY: image
image: ## Build the container image hyperfleet/hyperfleet:dev (IMAGE=…) with Docker; builder from the local Go toolchain
	IMAGE=$(IMAGE) VERSION=$(VERSION) BUILD=$(BUILD) BUILD_TIME=$(BUILD_TIME) deploy/build-image.sh

.PHONY: db/setup
db/setup: secrets ## Start a PostgreSQL container on localhost:5434 (DB_PORT) and migrate it
	docker run -d --name $(DB_CONTAINER) -e POSTGRES_DB=hyperfleet -p 127.0.0.1:$(DB_PORT):5432 $(DB_IMAGE)
	@for i in $$(seq 1 60); do pg_isready -q -h 127.0.0.1 -p $(DB_PORT) && break; sleep 0.5; done
	@sleep 1
	$(MAKE) build && $(BIN)/hyperfleet-api migrate --required-adapters '$(REQUIRED_ADAPTERS)'

.PHONY: db/login
db/login: ## Open psql on the database of make db/setup
	psql -h 127.0.0.1 -p $(DB_PORT) -U postgres hyperfleet

.PHONY: db/teardown
db/teardown: ## Remove the database container of make db/setup
	docker rm -f $(DB_CONTAINER)
