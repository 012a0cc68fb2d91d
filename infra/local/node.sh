#!/usr/bin/env bash
# The Node.js that make runs everything on: the machine's when it is Node $NODE_MAJOR or newer, else Node
# $NODE_VERSION (Node's official Linux build, served by the npm registry as the package node-linux-<arch>) installed
# once into $CACHE_DIR/node. The npm and npx of the machine run on it too: they are scripts started by `node`.
#
#   node.sh bin       prints the directory holding the `node` to put first on PATH (installs it when needed)
#   node.sh version   prints the version that directory's node reports
#
# Env: NODE_VERSION (the pinned 24.x), INFRA_CACHE_DIR.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODE_VERSION="${NODE_VERSION:-24.21.0}"
NODE_MAJOR="${NODE_VERSION%%.*}"
NODE_HOME="$CACHE_DIR/node"

# Major version of the node found on PATH; 0 when there is none.
machine_major() {
  local v
  v="$(node --version 2>/dev/null)" || { echo 0; return; }
  v="${v#v}"
  echo "${v%%.*}"
}

npm_arch() {
  case "$(uname -m)" in
    x86_64 | amd64) echo x64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) die "no Node $NODE_MAJOR build for $(uname -m): install Node $NODE_MAJOR or newer yourself" ;;
  esac
}

installed() { [[ -x "$NODE_HOME/bin/node" && "$(cat "$NODE_HOME/.version" 2>/dev/null)" == "$NODE_VERSION" ]]; }

install_node() {
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch Node $NODE_VERSION (package node-linux-$(npm_arch))"
  local pkg tmp
  pkg="node-linux-$(npm_arch)@$NODE_VERSION"
  log "Node on PATH is older than $NODE_MAJOR: installing $pkg into $NODE_HOME"
  mkdir -p "$CACHE_DIR"
  tmp="$(mktemp -d "$CACHE_DIR/node.tmp.XXXXXX")"
  # npm pack checks the tarball against the registry's integrity hash; only the binary and its licence are kept
  # (the tarball also holds ~50 MB of C headers for native addons, which nothing here builds against this node).
  (cd "$tmp" && npm pack "$pkg" --silent >/dev/null) || { rm -rf "$tmp"; die "npm pack $pkg failed"; }
  mkdir -p "$tmp/node"
  tar -xzf "$tmp"/node-linux-*.tgz -C "$tmp/node" --strip-components=1 package/bin/node package/LICENSE \
    || { rm -rf "$tmp"; die "unpacking $pkg failed"; }
  "$tmp/node/bin/node" --version >/dev/null || { rm -rf "$tmp"; die "the unpacked node does not run on this machine"; }
  echo "$NODE_VERSION" >"$tmp/node/.version"
  # Swapped in by rename, so a make started meanwhile never sees a half-unpacked node.
  rm -rf "$NODE_HOME.old"
  [[ -e "$NODE_HOME" ]] && mv "$NODE_HOME" "$NODE_HOME.old"
  mv "$tmp/node" "$NODE_HOME"
  rm -rf "$tmp" "$NODE_HOME.old"
  log "installed Node $("$NODE_HOME/bin/node" --version)"
}

node_bin() {
  if (( $(machine_major) >= NODE_MAJOR )); then
    dirname "$(command -v node)"
    return
  fi
  installed || install_node
  echo "$NODE_HOME/bin"
}

case "${1:-bin}" in
  bin) node_bin ;;
  version) "$(node_bin)/node" --version ;;
  *) die "usage: node.sh bin|version" ;;
esac
