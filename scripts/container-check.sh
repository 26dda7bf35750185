#!/usr/bin/env bash
# Builds the Dockerfile for real and runs the image, on a machine with no image registry but
# with Debian's package mirror (as CI sandboxes are), as root:
#   1. installs buildah, podman, debootstrap and runc (apt-get);
#   2. makes a Debian bookworm base image with debootstrap (minbase) from the mirror apt uses,
#      and imports it as localhost/debian:bookworm;
#   3. builds the Dockerfile with buildah (vfs storage, chroot isolation), both stages on that base
#      (BUILD_BASE, RUNTIME_BASE build arguments): the CPU image. Maven Central is not needed:
#      the local ~/.m2 is served over HTTP and passed as MAVEN_MIRROR;
#   4. runs `fsdp4j train --device cpu --steps 5` in it with podman and runc (crun fails in some
#      sandboxes; runc with these ulimits works), then `fsdp4j launch --standalone
#      --nproc-per-node 2 -- train --device cpu --world-size 4 --steps 3` (two processes in one
#      container), and prints the image sizes.
# With registry access, the GPU image is the same Dockerfile with its default (nvidia/cuda 13)
# bases: `docker build -t fsdp4j .`. Logs go to $OUT (default: runs/container-check).
# Usage: sudo scripts/container-check.sh     (a few minutes on 2 cores with a fast mirror)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/runs/container-check}
mkdir -p "$out"
exec > >(tee "$out/container-check.log") 2>&1
start=$SECONDS
say() { echo "[container-check $((SECONDS - start))s] $*"; }

storage=(--storage-driver vfs)
work=${CONTAINER_WORK:-/var/tmp/fsdp4j-container-check}
mkdir -p "$work"

say "1/4 apt-get install buildah podman debootstrap runc"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq buildah podman debootstrap runc >/dev/null
buildah --version; podman --version; runc --version | head -1

say "2/4 a Debian base image with debootstrap"
# the Debian archive among apt's sources (not the security archive, not a third-party repository)
mirror=${DEBIAN_MIRROR:-$( (grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
    /etc/apt/sources.list.d/ 2>/dev/null || true) | awk '{print $2; exit}')}
mirror=${mirror:-http://deb.debian.org/debian}
if ! podman "${storage[@]}" image exists localhost/debian:bookworm; then
    rm -rf "$work/rootfs"
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$out/debootstrap.log" 2>&1 \
        || { tail -20 "$out/debootstrap.log"; exit 1; }
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*   # debootstrap's downloads
    tar -C "$work/rootfs" -c . | podman "${storage[@]}" import - localhost/debian:bookworm
fi
say "   base: localhost/debian:bookworm from $mirror"

say "3/4 buildah bud (both stages on localhost/debian:bookworm)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$HOME/.m2/repository" && exec python3 -m http.server "$port" --bind 127.0.0.1 >"$out/maven-mirror.log" 2>&1) &
mirror_pid=$!
trap 'kill $mirror_pid 2>/dev/null || true' EXIT
buildah "${storage[@]}" bud --isolation chroot \
    --build-arg BUILD_BASE=localhost/debian:bookworm \
    --build-arg RUNTIME_BASE=localhost/debian:bookworm \
    --build-arg MAVEN_MIRROR="http://127.0.0.1:$port" \
    -t localhost/fsdp4j-cpu "$repo"
kill $mirror_pid 2>/dev/null || true

say "4/4 podman run (runc)"
run=(podman "${storage[@]}" run --rm --runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
"${run[@]}" localhost/fsdp4j-cpu train --device cpu --steps 5 | tee "$out/train.log"
grep -q '^done: 5 steps' "$out/train.log"
"${run[@]}" localhost/fsdp4j-cpu launch --standalone --nproc-per-node 2 -- train --device cpu --world-size 4 --steps 3 \
    | tee "$out/launch.log"
grep -q '^done: 3 steps' "$out/launch.log"
"${run[@]}" --entrypoint id localhost/fsdp4j-cpu | tee "$out/user.log"

say "images"
podman "${storage[@]}" images --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | tee "$out/images.txt"
say "done"
