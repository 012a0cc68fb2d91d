#!/usr/bin/env bash
# Confluent-compatible schema registry: Apicurio Registry 3.x (Quarkus), whose prebuilt
# distribution `io.apicurio:apicurio-registry-app:<v>:tar.gz:all` is on Maven Central.
# The Confluent REST API is served under /apis/ccompat/v7 (that is SCHEMA_REGISTRY_URL).
# (Karapace, the other candidate, is not published on PyPI: see infra/README.md.)
#
#   registry.sh start [--no-wait] | wait | stop | restart | status
#
# Storage (REGISTRY_STORAGE):
#   sql       (default) Postgres database `registry` of postgres.sh: survives restarts and
#             does not depend on the broker (a broker restart does not disturb the registry)
#   kafkasql  journal in the Kafka topic `kafkasql-journal` on our broker (like Confluent's `_schemas`)
#   mem       in-memory H2, lost on stop
# Env: REGISTRY_PORT (18081), REGISTRY_HEAP_OPTS (-Xms64m -Xmx384m), REGISTRY_START_TIMEOUT (180),
#      REGISTRY_DEFAULT_COMPATIBILITY (BACKWARD, like Confluent; empty = leave Apicurio's default NONE).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RDIR="$RUN_DIR/registry"
PIDFILE="$RDIR/registry.pid"
LOGFILE="$RDIR/registry.log"
DIST="$CACHE_DIR/apicurio-registry-$APICURIO_VERSION"
RUNNER="$DIST/apicurio-registry-app-$APICURIO_VERSION-runner.jar"
STORAGE="${REGISTRY_STORAGE:-$(cat "$RDIR/storage" 2>/dev/null || echo sql)}"
BASE="http://127.0.0.1:$REGISTRY_PORT"

ensure_dist_tarball() {
  [[ -f "$DIST/.complete" ]] && return 0
  local tmp="$DIST.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp/dl"
  log "registry: fetching io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all (Maven Central via ~/.m2)"
  # dependency:get (plugin 2.10, with its `dest`) rather than `copy`: the 3.0.9 parent pom is missing
  # on Central, which `copy`/`copy-dependencies` treat as fatal; get -Dtransitive=false does not read it.
  mvn_run org.apache.maven.plugins:maven-dependency-plugin:2.10:get \
    -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" -Dtransitive=false \
    -Ddest="$tmp/dl/registry.tar.gz" \
    || { rm -rf "$tmp"; die "registry: maven download failed"; }
  tar -xzf "$tmp"/dl/*.tar.gz -C "$tmp" || { rm -rf "$tmp"; die "registry: unpack failed"; }
  rm -rf "$tmp/dl"
  [[ -f "$tmp/apicurio-registry-app-$APICURIO_VERSION-runner.jar" ]] || { rm -rf "$tmp"; die "registry: runner jar not in the distribution"; }
  touch "$tmp/.complete"
  rm -rf "$DIST"; mv "$tmp" "$DIST"
}

storage_flags() {
  case "$STORAGE" in
    sql)
      # needs Postgres: start it when registry.sh is used on its own (a no-op under up.sh)
      "$LOCAL_DIR/postgres.sh" status >/dev/null 2>&1 || "$LOCAL_DIR/postgres.sh" start >&2
      "$LOCAL_DIR/postgres.sh" createdb registry >&2
      echo "-Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=postgresql"
      echo "-Dapicurio.datasource.url=jdbc:postgresql://127.0.0.1:$PG_PORT/registry"
      echo "-Dapicurio.datasource.username=$PG_USER -Dapicurio.datasource.password=unused"
      echo "-Dapicurio.datasource.jdbc.initial-size=2 -Dapicurio.datasource.jdbc.min-size=2 -Dapicurio.datasource.jdbc.max-size=20"
      ;;
    kafkasql)
      "$LOCAL_DIR/kafka.sh" status >/dev/null 2>&1 || "$LOCAL_DIR/kafka.sh" start >&2
      echo "-Dapicurio.storage.kind=kafkasql -Dapicurio.kafkasql.bootstrap.servers=$KAFKA_BROKERS"
      ;;
    mem) echo "-Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2" ;;
    *) die "registry: unknown REGISTRY_STORAGE=$STORAGE (sql|kafkasql|mem)" ;;
  esac
}

running() { pid_alive "$PIDFILE" "apicurio-registry-app"; }

ready() {
  curl -fsS -m 2 -o /dev/null "$BASE/health/ready" 2>/dev/null \
    && curl -fsS -m 2 -o /dev/null "$BASE/apis/ccompat/v7/subjects" 2>/dev/null
}

cmd_start() {
  local nowait="${1:-}"
  if running; then
    log "registry: already running (pid $(cat "$PIDFILE"), $BASE)"
    [[ "$nowait" == --no-wait ]] || cmd_wait
    return 0
  fi
  ensure_cmd curl curl
  check_java
  require_port_free "$REGISTRY_PORT" registry REGISTRY_PORT
  ensure_dist_tarball
  mkdir -p "$RDIR"
  local flags heap="${REGISTRY_HEAP_OPTS:--Xms64m -Xmx384m}" pid
  flags="$(storage_flags | tr '\n' ' ')"
  echo "$REGISTRY_PORT" >"$RDIR/port"
  echo "$STORAGE" >"$RDIR/storage"
  # shellcheck disable=SC2086
  pid="$(cd "$DIST" && spawn "$LOGFILE" "$(java_bin)" $heap -XX:+UseSerialGC -XX:ActiveProcessorCount=2 -Xshare:auto \
    -Djava.util.logging.manager=org.jboss.logmanager.LogManager \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$REGISTRY_PORT" \
    -Dquarkus.log.level=INFO \
    -Dapicurio.rest.deletion.group.enabled=true \
    -Dapicurio.rest.deletion.artifact.enabled=true \
    -Dapicurio.rest.deletion.artifact-version.enabled=true \
    -Dapicurio.storage.snapshot.location="$RDIR" \
    $flags \
    -jar "$RUNNER")"
  echo "$pid" >"$PIDFILE"
  log "registry: started Apicurio Registry $APICURIO_VERSION pid $pid (storage $STORAGE) on $BASE, log $LOGFILE"
  [[ "$nowait" == --no-wait ]] || cmd_wait
}

cmd_wait() {
  if ! wait_until registry "${REGISTRY_START_TIMEOUT:-180}" "$PIDFILE" ready; then
    tail -n 40 "$LOGFILE" >&2 || true
    die "registry: failed to start (log $LOGFILE)"
  fi
  local compat="${REGISTRY_DEFAULT_COMPATIBILITY-BACKWARD}"
  if [[ -n "$compat" ]]; then
    # Confluent's global default is BACKWARD; Apicurio has no global rule unless one is set.
    curl -fsS -m 10 -o /dev/null -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
      --data "{\"compatibility\":\"$compat\"}" "$BASE/apis/ccompat/v7/config" \
      || log "registry: WARNING could not set the global compatibility to $compat"
  fi
  log "registry: ready on $BASE/apis/ccompat/v7"
}

cmd_stop() { stop_pidfile "$PIDFILE" registry "${REGISTRY_STOP_TIMEOUT:-30}" apicurio-registry-app; }

cmd_status() {
  if running && ready; then echo "registry: running (pid $(cat "$PIDFILE")) on $BASE/apis/ccompat/v7"; return 0; fi
  if running; then echo "registry: starting (pid $(cat "$PIDFILE"))"; return 2; fi
  echo "registry: stopped"; return 1
}

case "${1:-}" in
  start) cmd_start "${2:-}" ;;
  wait) cmd_wait ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  status) cmd_status ;;
  fetch) ensure_dist_tarball ;;
  *) echo "usage: $0 start [--no-wait]|wait|stop|restart|status|fetch" >&2; exit 64 ;;
esac
