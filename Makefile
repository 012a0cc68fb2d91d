# Front door of the repo. `make run` and `make test` work on a fresh machine: they install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := run

# Node: the machine's when it is 24 or newer, else Node 24 installed once into infra/local/.cache/node
# (infra/local/node.sh). Put first on PATH for every recipe, so npm ci, tsc, vitest, the service, the benchmarks and
# the processes they start all run on it.
NODE_BIN := $(shell bash infra/local/node.sh bin)
ifeq ($(NODE_BIN),)
$(error no Node 24 available: see the message of infra/local/node.sh above)
endif
export PATH := $(NODE_BIN):$(PATH)
# node_modules is installed again when Node's ABI changes: a few dev dependencies hold addons built for one ABI.
NODE_ABI := $(shell $(NODE_BIN)/node -p process.versions.modules)
STAMP := node_modules/.install-stamp-abi$(NODE_ABI)
CLIENT_STAMP := clients/node/node_modules/.install-stamp

$(STAMP): package.json package-lock.json $(wildcard patches/*.patch)
	npm ci --no-audit --no-fund --loglevel=error
	@rm -f node_modules/.install-stamp*
	@touch $@

$(CLIENT_STAMP): clients/node/package.json clients/node/package-lock.json
	npm --prefix clients/node ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: node install build build-dev run test test-unit infra-up infra-down bench kstreams-baseline demo clean typecheck clients rules-check openapi schemathesis image test-image helm-tools

## Prints the node every recipe runs on (installing Node 24 first when the machine's is older).
node:
	@echo "$$(command -v node) $$(node --version)"

install: $(STAMP)

# Compiles only when a TypeScript source (or the compiler's config) is newer than the last build, so `make run`
# on an unchanged tree starts the service at once (README, "For SREs": time to ready).
SERVICE_SOURCES := $(shell find services -name '*.ts' -not -name '*.test.ts' 2>/dev/null)
DEV_SOURCES := $(shell find bench test/sandbox -name '*.ts' -not -name '*.test.ts' 2>/dev/null)
BUILD_STAMP := dist/.build-stamp
BUILD_DEV_STAMP := dist/.build-dev-stamp

$(BUILD_STAMP): $(STAMP) tsconfig.json $(SERVICE_SOURCES)
	npx tsc -p tsconfig.json
	@touch $@

$(BUILD_DEV_STAMP): $(STAMP) tsconfig.json tsconfig.dev.json $(SERVICE_SOURCES) $(DEV_SOURCES)
	npx tsc -p tsconfig.dev.json
	@touch $(BUILD_STAMP) $@

## The service alone (dist/services): what `make run` starts.
build: $(BUILD_STAMP)

## The service plus the benchmarks, the platform sandbox and the demo (tsconfig.dev.json).
build-dev: $(BUILD_DEV_STAMP)

typecheck: $(STAMP)
	npx tsc -p tsconfig.dev.json --noEmit

## The whole service on the embedded default (no Kafka, Postgres or registry needed). Ready at GET /readyz.
run: build
	exec node dist/services/compose/main.js

## The sender kit's npm package (clients/node), built to clients/node/dist. Its tests run in `make test`.
clients: $(CLIENT_STAMP)
	npm --prefix clients/node run build

## Schemathesis, pinned, in a virtual environment of its own (test/schemathesis runs it in `make test`).
SCHEMATHESIS_VERSION := 4.32.5
SCHEMATHESIS_VENV := .tools/schemathesis
SCHEMATHESIS_STAMP := $(SCHEMATHESIS_VENV)/.installed-$(SCHEMATHESIS_VERSION)

$(SCHEMATHESIS_STAMP):
	rm -rf $(SCHEMATHESIS_VENV)
	python3 -m venv $(SCHEMATHESIS_VENV)
	$(SCHEMATHESIS_VENV)/bin/pip install --quiet --disable-pip-version-check schemathesis==$(SCHEMATHESIS_VERSION)
	@touch $@

schemathesis: $(SCHEMATHESIS_STAMP)

## The whole suite, integration tests against real Kafka, registry and Postgres included.
test: build-dev clients schemathesis
	bash infra/local/redis.sh ensure
	bash infra/local/chromium.sh ensure
	bash ops/prometheus/promtool.sh ensure
	bash ops/prometheus/promtool.sh check
	bash infra/helm/tools.sh
	bash test/run-suite.sh

infra-up: build
	bash infra/local/up.sh

infra-down:
	bash infra/local/down.sh

## The Kafka Streams baseline of pipeline-drain-kafka (bench/baselines/kstreams): offline when ~/.m2 holds every
## artifact, else from Maven Central; the broker's Kafka version (infra/local/lib.sh). Without Java 17 and Maven the
## other benchmarks still run; the drain benchmark then fails with the build's error.
kstreams-baseline:
	@if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then \
	  echo "kstreams-baseline: java or mvn not found; pipeline-drain-kafka will fail"; exit 0; fi; \
	cd bench/baselines/kstreams && v="$$(bash -c 'source ../../../infra/local/lib.sh >/dev/null 2>&1; echo $$KAFKA_VERSION')" && \
	  { mvn -B -q -o package -DskipTests -Dkafka.version="$$v" 2>/dev/null || mvn -B -q package -DskipTests -Dkafka.version="$$v"; }

bench: build-dev kstreams-baseline
	node dist/bench/run.js

demo: build-dev
	node dist/test/sandbox/demo.js

clean:
	rm -rf dist clients/node/dist

## promtool check rules + promtool test rules on ops/prometheus (installs Debian's prometheus when missing).
rules-check:
	bash ops/prometheus/promtool.sh check

## Regenerates docs/openapi.json from the routes, and the SDK's wire types from it (tests fail when either is stale).
openapi: build $(CLIENT_STAMP)
	node dist/services/bin/openapi.js
	npm --prefix clients/node run generate

## The container image (infra/image/Containerfile) as $(IMAGE_NAME), built with podman (installed when missing). Where
## no image registry is reachable the Node base is assembled locally first; BASE_IMAGE=... builds on another base.
IMAGE_NAME ?= localhost/event-forwarder:dev
image:
	IMAGE_NAME=$(IMAGE_NAME) bash infra/image/build.sh

## Builds the image, then starts the service from its exported filesystem (chroot, read-only root, the image's user)
## on the local Kafka stack: ready, an event forwarded to the platform sandbox, SIGTERM drains (test/integration/image.test.ts).
test-image: image build-dev
	IMAGE_UNDER_TEST=$(IMAGE_NAME) npx vitest run --project integration test/integration/image.test.ts

## helm and the chart's validator (infra/helm/kube-validate), built from the Go module proxy into infra/local/.cache/tools.
helm-tools:
	bash infra/helm/tools.sh
