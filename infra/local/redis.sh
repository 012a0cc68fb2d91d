#!/usr/bin/env bash
# A throw-away Redis (Debian's redis-server) for the shared rate-limit test and for trying REDIS_URL by hand.
#   infra/local/redis.sh ensure          install redis-server if missing (root + apt)
#   infra/local/redis.sh start [PORT]    start on PORT (default $REDIS_PORT or 16379), no persistence
#   infra/local/redis.sh stop
source "$(dirname "$0")/lib.sh"
REDIS_PORT="${2:-${REDIS_PORT:-$(saved_port redis 16379)}}"
dir="$RUN_DIR/redis"

case "${1:-}" in
  ensure)
    ensure_cmd redis-server redis-server
    ;;
  start)
    ensure_cmd redis-server redis-server
    mkdir -p "$dir"
    echo "$REDIS_PORT" > "$dir/port"
    if pid_alive "$dir/pid" redis-server; then exit 0; fi
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$dir/pid" --logfile "$dir/redis.log" --dir "$dir"
    for _ in $(seq 1 50); do
      redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && { log "redis ready on $REDIS_PORT"; exit 0; }
      sleep 0.1
    done
    die "redis did not start; see $dir/redis.log"
    ;;
  stop)
    stop_pidfile "$dir/pid" redis 10 redis-server
    ;;
  *) echo "usage: $0 ensure|start [PORT]|stop" >&2; exit 2 ;;
esac
