#!/usr/bin/env bash
# Exports an image's filesystem to a directory, and its run configuration (entrypoint, command, environment, user,
# working directory) to <dir>.config.json: what a container runtime would start, for machines that run none
# (the image test starts the service from it with chroot).
#   export.sh [IMAGE] DIR      IMAGE defaults to $IMAGE_NAME (localhost/event-forwarder:dev)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 1 ]] || die "usage: $0 [IMAGE] DIR"
if [[ $# -ge 2 ]]; then image="$1" dir="$2"; else image="$IMAGE_NAME" dir="$1"; fi
pod image exists "$image" || die "no image $image: make image first"
rm -rf "$dir"; mkdir -p "$dir"
cid="$(pod create --pull never "$image")"
trap 'pod rm -f -v "$cid" >/dev/null 2>&1 || true' EXIT
pod export "$cid" | tar -C "$dir" --numeric-owner -xf -
pod image inspect --format '{{json .Config}}' "$image" >"$dir.config.json"
log "exported $image to $dir ($(du -sh "$dir" | cut -f1))"
