#!/usr/bin/env bash
# Prometheus' own tools for the rules in ops/prometheus (Debian's `prometheus` package: prometheus + promtool).
#   ops/prometheus/promtool.sh ensure   install the package if promtool or prometheus is missing (root + apt)
#   ops/prometheus/promtool.sh check    promtool check config (the example) + check rules + test rules (every alert
#                                       has a unit test)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../infra/local/lib.sh"

case "${1:-}" in
  ensure)
    ensure_cmd promtool prometheus
    ensure_cmd prometheus prometheus
    ;;
  check)
    ensure_cmd promtool prometheus
    promtool check config "$here"/prometheus.example.yml >/dev/null
    promtool check rules "$here"/rules/*.yml
    promtool test rules "$here"/tests/*.yml
    ;;
  *) echo "usage: $0 ensure|check" >&2; exit 2 ;;
esac
