#!/usr/bin/env bash
# Builds the chart's check tools from the Go module proxy into infra/local/.cache/tools (git-ignored), once:
#   helm           helm.sh/helm/v3/cmd/helm@$HELM_VERSION
#   kube-validate  infra/helm/kube-validate (strict decoding with k8s.io/api; see its main.go)
# Prints nothing when both are there. `tools.sh path helm|kube-validate` prints a tool's path.
# Env: HELM_VERSION (v3.22.0), TOOLS_DIR.
set -euo pipefail
HELM_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HELM_DIR/../.." && pwd)"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
TOOLS_DIR="${TOOLS_DIR:-$REPO_ROOT/infra/local/.cache/tools}"
HELM_BIN="$TOOLS_DIR/helm-$HELM_VERSION/helm"
VALIDATE_BIN="$TOOLS_DIR/kube-validate-$(cat "$HELM_DIR/kube-validate/go.mod" "$HELM_DIR/kube-validate/go.sum" "$HELM_DIR/kube-validate/main.go" | sha256sum | cut -c1-12)/kube-validate"

log() { printf '[helm-tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ "${1:-}" == path ]]; then
  case "${2:-}" in helm) echo "$HELM_BIN" ;; kube-validate) echo "$VALIDATE_BIN" ;; *) exit 64 ;; esac
  exit 0
fi

command -v go >/dev/null 2>&1 || { log "ERROR: go is missing (apt-get install golang, or a Go >= 1.26 toolchain)"; exit 1; }
if [[ ! -x "$HELM_BIN" ]]; then
  log "building helm $HELM_VERSION from the Go module proxy (a few minutes, once)"
  GOBIN="$(dirname "$HELM_BIN")" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
if [[ ! -x "$VALIDATE_BIN" ]]; then
  log "building kube-validate (k8s.io/api $(awk '$1=="k8s.io/api"{print $2}' "$HELM_DIR/kube-validate/go.mod"))"
  (cd "$HELM_DIR/kube-validate" && CGO_ENABLED=0 go build -buildvcs=false -o "$VALIDATE_BIN" .)
fi
