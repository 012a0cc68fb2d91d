#!/usr/bin/env bash
# Throw-away Postgres cluster from Debian's packages (apt-get install postgresql when missing).
# Data in infra/local/run/pg/data, trust auth on 127.0.0.1, TCP only (no unix socket).
# As root the server runs as the `postgres` system user (postgres refuses to run as root).
#
#   postgres.sh start|stop|restart|status
#   postgres.sh psql [ARGS...]       psql to the `events` database (or pass -d NAME)
#   postgres.sh createdb NAME        create a database if missing
#
# Env: PG_PORT (15432), PG_START_TIMEOUT (60), INFRA_RUN_DIR.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PGDIR="$RUN_DIR/pg"
PGDATA="$PGDIR/data"
LOGFILE="$PGDIR/postgres.log"
DATABASES=(events registry)

pg_bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
  if [[ -z "$d" || ! -x "$d/initdb" ]]; then
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || die "postgres: initdb not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
    log "postgres: not installed, apt-get install -y postgresql"
    apt_install postgresql postgresql-client >&2
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
    [[ -x "$d/initdb" ]] || die "postgres: install failed"
  fi
  echo "$d"
}

# Run a server-side command as the cluster owner.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

prepare_dir() {
  mkdir -p "$PGDIR"
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "postgres: system user 'postgres' missing (apt-get install postgresql)"
    chown postgres: "$PGDIR"
    chmod 700 "$PGDIR"
    as_owner test -w "$PGDIR" || die "postgres: user postgres cannot reach $PGDIR (a parent directory is not o+x); set INFRA_RUN_DIR to a path it can reach"
  fi
}

BIN=""
bin() { [[ -n "$BIN" ]] || BIN="$(pg_bindir)"; echo "$BIN/$1"; }

psql_() { "$(bin psql)" -X -q -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" "$@"; }

ready() { "$(bin pg_isready)" -q -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" >/dev/null 2>&1; }

running() { [[ -f "$PGDATA/postmaster.pid" ]] && as_owner "$(bin pg_ctl)" -D "$PGDATA" status >/dev/null 2>&1; }

createdb_() { # name
  if [[ "$(psql_ -d postgres -tAc "select 1 from pg_database where datname = '$1'")" != 1 ]]; then
    psql_ -d postgres -c "create database \"$1\"" >/dev/null
    log "postgres: created database $1"
  fi
}

cmd_start() {
  if running; then
    log "postgres: already running (127.0.0.1:$PG_PORT)"
  else
    prepare_dir
    if [[ ! -f "$PGDATA/PG_VERSION" ]]; then
      log "postgres: initdb $PGDATA"
      rm -rf "$PGDATA"
      as_owner "$(bin initdb)" -D "$PGDATA" -U "$PG_USER" --auth=trust -E UTF8 --locale=C --no-sync >/dev/null \
        || die "postgres: initdb failed"
      # Throw-away cluster: favour speed over durability.
      cat >>"$PGDATA/postgresql.conf" <<'EOF'

# --- infra/local/postgres.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 128MB
log_min_messages = warning
log_timezone = 'UTC'
timezone = 'UTC'
EOF
    fi
    require_port_free "$PG_PORT" postgres PG_PORT
    # The port goes on the command line so PG_PORT can change between starts.
    as_owner "$(bin pg_ctl)" -D "$PGDATA" -l "$LOGFILE" -w -t "${PG_START_TIMEOUT:-60}" \
      -o "-p $PG_PORT" start >/dev/null || { tail -n 30 "$LOGFILE" >&2; die "postgres: failed to start (log $LOGFILE)"; }
    echo "$PG_PORT" >"$PGDIR/port"
    log "postgres: started on 127.0.0.1:$PG_PORT (pid $(head -n1 "$PGDATA/postmaster.pid"), log $LOGFILE)"
  fi
  wait_until postgres "${PG_START_TIMEOUT:-60}" "" ready || die "postgres: not accepting connections"
  for db in "${DATABASES[@]}"; do createdb_ "$db"; done
}

cmd_stop() {
  if [[ -f "$PGDATA/postmaster.pid" ]] && running; then
    log "postgres: stopping"
    as_owner "$(bin pg_ctl)" -D "$PGDATA" -m fast -w -t 60 stop >/dev/null
    log "postgres: stopped"
  else
    log "postgres: not running"
  fi
}

cmd_status() {
  if running && ready; then echo "postgres: running on 127.0.0.1:$PG_PORT ($DATABASE_URL)"; return 0; fi
  if running; then echo "postgres: starting"; return 2; fi
  echo "postgres: stopped"; return 1
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  status) cmd_status ;;
  psql) shift; if [[ " $* " == *" -d "* ]]; then psql_ "$@"; else psql_ -d events "$@"; fi ;;
  createdb) createdb_ "$2" ;;
  *) echo "usage: $0 start|stop|restart|status|psql [ARGS]|createdb NAME" >&2; exit 64 ;;
esac
