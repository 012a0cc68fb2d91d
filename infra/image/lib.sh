# Shared by infra/image/*.sh: where the image tooling keeps its files, and podman on a storage of its own under
# the cache dir (leaves the machine's own podman store alone). IMAGE_STORAGE_DRIVER=vfs where overlayfs is refused
# (vfs copies every layer in full: several times slower).
IMAGE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$IMAGE_DIR/../.." && pwd)"
IMAGE_CACHE="${IMAGE_CACHE_DIR:-$REPO_ROOT/infra/local/.cache/image}"
NODE_MAJOR="${NODE_MAJOR:-24}"
BASE_IMAGE_LOCAL="localhost/event-forwarder-base:node$NODE_MAJOR"
BUILD_IMAGE_LOCAL="localhost/event-forwarder-build:node$NODE_MAJOR"
IMAGE_NAME="${IMAGE_NAME:-localhost/event-forwarder:dev}"

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ensure_podman() {
  command -v podman >/dev/null 2>&1 && return 0
  [[ $EUID -eq 0 ]] || die "podman is missing: apt-get install podman"
  log "installing podman (Debian)"
  apt-get install -y -qq podman >/dev/null || { apt-get update -qq && apt-get install -y -qq podman >/dev/null; } || die "apt-get install podman failed"
}

pod() {
  local driver="${IMAGE_STORAGE_DRIVER:-overlay}"
  # The run root holds locks and mounts only; podman refuses one longer than 50 characters, so it lives in /tmp,
  # named after the store it serves.
  local runroot="/tmp/efpod-$(printf '%s' "$IMAGE_CACHE/$driver" | sha256sum | cut -c1-10)"
  podman --root "$IMAGE_CACHE/storage-$driver" --runroot "$runroot" --storage-driver "$driver" "$@"
}
