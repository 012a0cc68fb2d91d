#!/usr/bin/env bash
# `make image`: builds infra/image/Containerfile into $IMAGE_NAME (localhost/event-forwarder:dev) with podman
# (`--isolation chroot`: no container runtime needed to build). BASE_IMAGE unset: the base is assembled locally
# first (infra/image/base.sh), for machines that reach no image registry; set it to build on another base, e.g.
# BASE_IMAGE=docker.io/library/node:24-bookworm-slim (BUILD_IMAGE, the build stages' base, defaults to it).
# Prints the image's size.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_podman
base="${BASE_IMAGE:-}" build="${BUILD_IMAGE:-${BASE_IMAGE:-}}"
if [[ -z "$base" ]]; then
  bash "$IMAGE_DIR/base.sh"
  base="$BASE_IMAGE_LOCAL" build="$BUILD_IMAGE_LOCAL"
fi
secrets=()
[[ -n "${NODE_EXTRA_CA_CERTS:-}" && -f "$NODE_EXTRA_CA_CERTS" ]] && secrets=(--secret "id=ca,src=$NODE_EXTRA_CA_CERTS")
log "building $IMAGE_NAME on $base"
pod build "${secrets[@]}" --isolation chroot --network host --layers \
  -f "$IMAGE_DIR/Containerfile" --ignorefile "$IMAGE_DIR/containerignore" \
  --build-arg "BASE_IMAGE=$base" --build-arg "BUILD_IMAGE=$build" -t "$IMAGE_NAME" "$REPO_ROOT" >&2
size="$(pod image inspect --format '{{.Size}}' "$IMAGE_NAME")"
log "built $IMAGE_NAME: $((size / 1000000)) MB"
