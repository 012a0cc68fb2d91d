#!/usr/bin/env bash
# Stop what up.sh started (by pid files / pg_ctl). Idempotent.
#   infra/local/down.sh           stop; data kept (next up.sh is a warm start)
#   infra/local/down.sh --purge   stop and delete infra/local/run (data, logs) and .env;
#                                 the download cache (.cache, ~/.m2) is kept
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$LOCAL_DIR/registry.sh" stop
"$LOCAL_DIR/kafka.sh" stop
"$LOCAL_DIR/postgres.sh" stop

if [[ "${1:-}" == --purge ]]; then
  case "$RUN_DIR" in /|"$HOME"|"$REPO_ROOT"|"") die "refusing to purge RUN_DIR=$RUN_DIR" ;; esac
  log "purging $RUN_DIR and $LOCAL_DIR/.env"
  rm -rf "$RUN_DIR" "$LOCAL_DIR/.env"
fi
