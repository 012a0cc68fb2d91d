# Front door of the repo. `make run` and `make test` work on a fresh machine: they install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := run
STAMP := node_modules/.install-stamp

$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: install build run test test-unit infra-up infra-down bench demo clean typecheck

install: $(STAMP)

build: $(STAMP)
	npx tsc -p tsconfig.json

typecheck: $(STAMP)
	npx tsc -p tsconfig.json --noEmit

## The whole service on the embedded default (no Kafka, Postgres or registry needed). Ready at GET /readyz.
run: build
	exec node dist/services/main.js

## The whole suite, integration tests against real Kafka, registry and Postgres included.
test: build
	bash infra/local/redis.sh ensure
	bash infra/local/chromium.sh ensure
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

## Regenerates docs/openapi.json from the routes (a test fails when it is stale).
openapi: build
	node dist/services/openapi-cli.js
