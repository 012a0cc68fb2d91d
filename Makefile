# Front door of the repo. `make run` and `make test` work on a fresh machine: they install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := run
STAMP := node_modules/.install-stamp
CLIENT_STAMP := clients/node/node_modules/.install-stamp

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CLIENT_STAMP): clients/node/package.json clients/node/package-lock.json
	npm --prefix clients/node ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: install build build-dev run test test-unit infra-up infra-down bench demo clean typecheck clients rules-check openapi image test-image helm-tools

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

## The whole suite, integration tests against real Kafka, registry and Postgres included.
test: build-dev clients
	bash infra/local/redis.sh ensure
	bash infra/local/chromium.sh ensure
	bash ops/prometheus/promtool.sh ensure
	bash ops/prometheus/promtool.sh check
	bash infra/helm/tools.sh
	npx vitest run

infra-up: build
	bash infra/local/up.sh

infra-down:
	bash infra/local/down.sh

bench: build-dev
	node dist/bench/run.js

demo: build-dev
	node dist/test/sandbox/demo.js

clean:
	rm -rf dist clients/node/dist

## promtool check rules + promtool test rules on ops/prometheus (installs Debian's prometheus when missing).
rules-check:
	bash ops/prometheus/promtool.sh check

## Regenerates docs/openapi.json from the routes (a test fails when it is stale).
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
