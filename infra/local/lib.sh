# shellcheck shell=bash disable=SC2034
# Shared helpers for infra/local/*.sh. Sourced, not run.
#
# Layout (all overridable by env):
#   INFRA_CACHE_DIR  (default infra/local/.cache)  downloaded jars / registry distribution (kept by down.sh --purge)
#   INFRA_RUN_DIR    (default infra/local/run)     data dirs, logs, pid files, effective ports
# Maven resolves through ~/.m2 as usual, so a wiped cache dir is refilled without network.

set -euo pipefail

LOCAL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOCAL_DIR/../.." && pwd)"
CACHE_DIR="${INFRA_CACHE_DIR:-$LOCAL_DIR/.cache}"
RUN_DIR="${INFRA_RUN_DIR:-$LOCAL_DIR/run}"

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
APICURIO_VERSION="${APICURIO_VERSION:-3.0.9}"

log()  { printf '[infra %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()  { printf '[infra] ERROR: %s\n' "$*" >&2; exit 1; }

# Effective port of a service: env var > the port it was last started on > default.
# (So `kafka.sh stop && kafka.sh start` keeps the port given to up.sh.)
saved_port() { # name default
  local f="$RUN_DIR/$1/port"
  if [[ -s "$f" ]]; then cat "$f"; else echo "$2"; fi
}
KAFKA_PORT="${KAFKA_PORT:-$(saved_port kafka 19092)}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$(saved_port kafka-controller 19093)}"
REGISTRY_PORT="${REGISTRY_PORT:-$(saved_port registry 18081)}"
PG_PORT="${PG_PORT:-$(saved_port pg 15432)}"

KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
REGISTRY_URL="http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
PG_USER=postgres
DATABASE_URL="postgres://$PG_USER@127.0.0.1:$PG_PORT/events"

# ---------------------------------------------------------------- tools

# Install a Debian package when a command is missing and we are root with apt (fresh CI machines).
ensure_cmd() { # cmd apt-package
  command -v "$1" >/dev/null 2>&1 && return 0
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "$1 not found: apt-get install -y $2"
    apt_install "$2"
    command -v "$1" >/dev/null 2>&1 && return 0
  fi
  die "'$1' not found (install the Debian package '$2')"
}

_APT_UPDATED=0
apt_install() {
  if [[ $_APT_UPDATED -eq 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
    _APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

java_bin() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then echo "$JAVA_HOME/bin/java"; return; fi
  ensure_cmd java openjdk-17-jre-headless
  command -v java
}

check_java() {
  local j v
  j="$(java_bin)"
  v="$("$j" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}')"
  [[ "${v%%.*}" -ge 17 ]] || die "Java >= 17 needed (found $v at $j)"
}

mvn_bin() { ensure_cmd mvn maven; command -v mvn; }

# Run maven quietly (its output goes to a log that is shown only on failure). Uses ~/.m2 as usual.
mvn_run() { # args...
  local out rc=0
  out="$(mktemp)"
  "$(mvn_bin)" -B -q -Dstyle.color=never "$@" >"$out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then sed 's/\x1b\[[0-9;]*m//g' "$out" | tail -n 40 >&2; fi
  rm -f "$out"
  return $rc
}

# Flags for short-lived JVM tools (topic tool, console producer): fast start, small heap.
JAVA_TOOL_FLAGS=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto)

# ---------------------------------------------------------------- processes

port_open() { # port -> 0 if something listens on 127.0.0.1:port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pid_alive() { # pidfile [cmdline-substring]
  local f="$1" pid
  [[ -s "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -n "${2:-}" ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
  fi
}

# Stop the process in a pid file: SIGTERM, wait up to $3 seconds, then SIGKILL. With $4, only a process whose command
# line holds it: a stale pid file whose pid was reused names someone else's process.
stop_pidfile() { # pidfile name [timeout] [cmdline-substring]
  local f="$1" name="$2" t="${3:-60}" pid i
  if ! pid_alive "$f" "${4:-}"; then rm -f "$f"; log "$name: not running"; return 0; fi
  pid="$(cat "$f")"
  log "$name: stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < t * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$f"; log "$name: stopped"; return 0; }
    sleep 0.1
  done
  log "$name: did not stop in ${t}s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  sleep 0.5
  rm -f "$f"
}

# Start a command detached (own session, survives the calling shell), stdout+stderr to a log.
# Prints the pid. The previous log is kept as <log>.1.
spawn() { # logfile cmd...
  local logf="$1"; shift
  [[ -f "$logf" ]] && mv -f "$logf" "$logf.1"
  # In a non-interactive shell a background job is no process-group leader, so setsid execs
  # in place and $! is the service's own pid.
  setsid "$@" </dev/null >>"$logf" 2>&1 &
  echo $!
}

# Poll until a check passes; fail early if the pid dies. Never a fixed sleep.
wait_until() { # name timeout-seconds pidfile check-cmd...
  local name="$1" t="$2" pidf="$3"; shift 3
  local start=$SECONDS
  while ((SECONDS - start < t)); do
    if "$@"; then return 0; fi
    if [[ -n "$pidf" ]] && ! pid_alive "$pidf"; then
      log "$name: process exited while starting"
      return 1
    fi
    sleep 0.25
  done
  log "$name: not ready after ${t}s"
  return 1
}

require_port_free() { # port name
  if port_open "$1"; then
    die "$2: port $1 on 127.0.0.1 is already in use by another process (set ${3:-the port env var} to use another port)"
  fi
}

# ---------------------------------------------------------------- repo helpers

# Compile the TypeScript CLIs (topics, migrations) when dist/ is missing or older than their sources.
ensure_dist() {
  local need=0 src js
  for src in services/bin/topics.ts services/shared/topics.ts services/bin/migrate.ts; do
    [[ -f "$REPO_ROOT/$src" ]] || continue
    js="$REPO_ROOT/dist/${src%.ts}.js"
    if [[ ! -f "$js" || "$REPO_ROOT/$src" -nt "$js" ]]; then need=1; fi
  done
  [[ $need -eq 1 ]] || return 0
  [[ -d "$REPO_ROOT/node_modules" ]] || (cd "$REPO_ROOT" && log "npm ci" && npm ci --no-audit --no-fund >&2)
  log "building dist/ (npx tsc -p tsconfig.json)"
  # tsc still emits on type errors; the CLIs are checked for below.
  (cd "$REPO_ROOT" && npx --no-install tsc -p tsconfig.json >&2) || log "tsc reported errors (continuing with what it emitted)"
}
