# Front door of the repo. `make run` and `make test` work on a fresh machine: they install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := run
STAMP := node_modules/.install-stamp

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: install build run test test-unit infra-up infra-down bench demo clean typecheck rules-check openapi

install: $(STAMP)

# Compiles only when a TypeScript source (or the compiler's config) is newer than the last build, so `make run`
# on an unchanged tree starts the service at once (README, "For SREs": time to ready).
TS_SOURCES := $(shell find services bench -name '*.ts' -not -name '*.test.ts' 2>/dev/null)
BUILD_STAMP := dist/.build-stamp

$(BUILD_STAMP): $(STAMP) tsconfig.json $(TS_SOURCES)
	npx tsc -p tsconfig.json
	@touch $@

build: $(BUILD_STAMP)

typecheck: $(STAMP)
	npx tsc -p tsconfig.json --noEmit

## The whole service on the embedded default (no Kafka, Postgres or registry needed). Ready at GET /readyz.
run: build
	exec node dist/services/main.js

## The whole suite, integration tests against real Kafka, registry and Postgres included.
test: build
	bash infra/local/redis.sh ensure
	bash ops/prometheus/promtool.sh ensure
	bash ops/prometheus/promtool.sh check
	npx vitest run

infra-up: build
	bash infra/local/up.sh

infra-down:
	bash infra/local/down.sh

bench: build
	node dist/bench/run.js

demo: build
	node dist/services/demo.js

clean:
	rm -rf dist

## promtool check rules + promtool test rules on ops/prometheus (installs Debian's prometheus when missing).
rules-check:
	bash ops/prometheus/promtool.sh check

## Regenerates docs/openapi.json from the routes (a test fails when it is stale).
openapi: build
	node dist/services/openapi-cli.js
