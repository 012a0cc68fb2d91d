#!/usr/bin/env bash
# Debian's chromium for the console's browser tests (test/e2e/console*.test.ts, driven by playwright-core).
#   infra/local/chromium.sh ensure    install chromium if missing (root + apt)
source "$(dirname "$0")/lib.sh"

case "${1:-}" in
  ensure)
    ensure_cmd chromium chromium
    ;;
  *) echo "usage: $0 ensure" >&2; exit 2 ;;
esac
