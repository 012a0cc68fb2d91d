#!/usr/bin/env bash
# After `docker compose -f infra/docker-compose.yml up -d --wait`: create the service's topics
# (Kafka's own kafka-topics.sh inside the container), set the registry's global compatibility
# to BACKWARD (Confluent's default), run migrations, write infra/local/.env.
# Same steps as infra/local/up.sh, for the Docker setup. (Not testable on the no-Docker dev machines.)
set -euo pipefail
INFRA="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_ROOT="$(cd "$INFRA/.." && pwd)"
DC=(docker compose -f "$INFRA/docker-compose.yml")

cd "$REPO_ROOT"
if [[ ! -f dist/services/bin/topics.js ]]; then npx --no-install tsc -p tsconfig.json || true; fi

node dist/services/bin/topics.js | while read -r name parts cfgs; do
  [[ -n "$name" ]] || continue
  args=(--bootstrap-server kafka:29092 --create --if-not-exists --topic "$name" --partitions "$parts" --replication-factor 1)
  if [[ -n "${cfgs:-}" ]]; then IFS=',' read -ra cs <<<"$cfgs"; for c in "${cs[@]}"; do args+=(--config "$c"); done; fi
  "${DC[@]}" exec -T kafka /opt/kafka/bin/kafka-topics.sh "${args[@]}" </dev/null
done

for _ in $(seq 1 120); do
  curl -fsS -o /dev/null http://127.0.0.1:18081/apis/ccompat/v7/subjects && break
  sleep 1
done
curl -fsS -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
  --data '{"compatibility":"BACKWARD"}' http://127.0.0.1:18081/apis/ccompat/v7/config >/dev/null

DATABASE_URL=postgres://postgres@127.0.0.1:15432/events
if [[ -f dist/services/bin/migrate.js ]]; then
  DATABASE_URL=$DATABASE_URL node dist/services/bin/migrate.js
fi

cat >"$INFRA/local/.env" <<ENV
KAFKA_BROKERS=127.0.0.1:19092
SCHEMA_REGISTRY_URL=http://127.0.0.1:18081/apis/ccompat/v7
DATABASE_URL=$DATABASE_URL
ENV
cat "$INFRA/local/.env"
