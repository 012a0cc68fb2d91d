#!/usr/bin/env bash
# Start the local stack without Docker: Kafka 4.x (KRaft, one node), Apicurio Registry
# (Confluent-compatible API) and Postgres; create topics, run migrations, write infra/local/.env.
#
#   infra/local/up.sh            idempotent: when everything is already up and healthy it only
#                                rewrites .env and exits 0
#   infra/local/up.sh --full     run every step even when all is up (topics, migrations)
#
# Env: KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (19093), REGISTRY_PORT (18081), PG_PORT (15432),
#      REGISTRY_STORAGE (sql|kafkasql|mem), INFRA_CACHE_DIR, INFRA_RUN_DIR. See infra/README.md.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ENV_FILE="$LOCAL_DIR/.env"
T0=$SECONDS

write_env() {
  local tmp="$ENV_FILE.tmp.$$"
  cat >"$tmp" <<EOF
KAFKA_BROKERS=$KAFKA_BROKERS
SCHEMA_REGISTRY_URL=$REGISTRY_URL
DATABASE_URL=$DATABASE_URL
EOF
  mv -f "$tmp" "$ENV_FILE"
  log "wrote $ENV_FILE"
  cat "$ENV_FILE" >&2
}

all_healthy() {
  "$LOCAL_DIR/postgres.sh" status >/dev/null 2>&1 &&
    "$LOCAL_DIR/kafka.sh" status >/dev/null 2>&1 &&
    "$LOCAL_DIR/registry.sh" status >/dev/null 2>&1
}

if [[ "${1:-}" != --full ]] && all_healthy; then
  log "already up and healthy"
  write_env
  exit 0
fi

mkdir -p "$RUN_DIR"
check_java

# The broker JVM boots while Postgres starts and the registry boots; waits come after.
"$LOCAL_DIR/kafka.sh" start --no-wait
"$LOCAL_DIR/postgres.sh" start
if [[ "${REGISTRY_STORAGE:-sql}" == kafkasql ]]; then
  "$LOCAL_DIR/kafka.sh" wait
fi
"$LOCAL_DIR/registry.sh" start --no-wait
"$LOCAL_DIR/kafka.sh" wait
"$LOCAL_DIR/kafka.sh" topics
"$LOCAL_DIR/kafka.sh" warmup

# Migrations (the service's own CLI; skipped while it does not exist yet).
ensure_dist
MIGRATE="$REPO_ROOT/dist/services/bin/migrate.js"
if [[ -f "$MIGRATE" ]]; then
  log "migrations: node dist/services/bin/migrate.js"
  (cd "$REPO_ROOT" && DATABASE_URL="$DATABASE_URL" node "$MIGRATE" >&2) || die "migrations failed"
else
  log "migrations: skipped (dist/services/bin/migrate.js not found)"
fi

"$LOCAL_DIR/registry.sh" wait

write_env
log "up in $((SECONDS - T0))s: Kafka $KAFKA_BROKERS, registry $REGISTRY_URL, Postgres $DATABASE_URL"
