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

.PHONY: install build build-dev run test test-unit infra-up infra-down bench demo clean typecheck clients rules-check openapi schemathesis

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

## Regenerates docs/openapi.json from the routes, and the SDK's wire types from it (tests fail when either is stale).
openapi: build $(CLIENT_STAMP)
	node dist/services/bin/openapi.js
	npm --prefix clients/node run generate
	npm --prefix clients/node run generate
