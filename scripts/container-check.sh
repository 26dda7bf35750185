#!/usr/bin/env bash
# Builds the Dockerfile for real, twice, and runs the images, on a machine with no image registry
# but with Debian's package mirror (as CI sandboxes are), as root:
#   1. installs buildah, podman, debootstrap and runc (apt-get) unless they are there;
#   2. makes a Debian bookworm base image with debootstrap (minbase) and imports it as
#      localhost/debian:bookworm;
#   3. makes localhost/fsdp4j-standin-cuda:13.1 from it: the stand-in CUDA, cuBLAS and NCCL of the
#      test build (host memory and an emulator, not a GPU) where nvidia/cuda keeps the real ones
#      (scripts/container/standin-cuda.Containerfile);
#   4. builds the Dockerfile with buildah (vfs storage, chroot isolation, cached layers), the build
#      stage on the Debian base both times: the CPU image (runtime base Debian) and the GPU image
#      on the stand-in CUDA (the real GPU image differs only in its bases). Maven Central is not
#      needed: the local ~/.m2 is served over HTTP and passed as MAVEN_MIRROR;
#   5. runs the cases below with podman and runc, one line each, among them every user id and a
#      read-only root with a noexec /tmp (as Docker's --read-only --tmpfs /tmp gives);
#   6. rebuilds the CPU image after a change to one source file and checks that the dependency
#      layer came from the cache (no download); prints the images' sizes and layers.
# Logs go to $OUT (default: runs/container-check): one per case under cases/. Exit 0 when every
# case passed, 1 otherwise. Not part of `mvn verify`: it needs root and minutes.
# Usage: sudo scripts/container-check.sh     (about 10 minutes on 2 cores with a fast mirror)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/runs/container-check}
rm -rf "$out/cases"
mkdir -p "$out/cases"
exec > >(tee "$out/container-check.log") 2>&1
start=$SECONDS
say() { echo "[container-check $((SECONDS - start))s] $*"; }

storage=(--storage-driver vfs)
work=${CONTAINER_WORK:-/var/tmp/fsdp4j-container-check}
mkdir -p "$work"

say "1/6 buildah, podman, debootstrap, runc"
if ! command -v buildah >/dev/null || ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null \
        || ! command -v runc >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq buildah podman debootstrap runc >/dev/null
fi
buildah --version; podman --version; runc --version | head -1

say "2/6 a Debian base image with debootstrap"
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

say "3/6 the stand-in CUDA base image"
standins=$repo/cuda-kernels/target/cuda-standins
if [[ ! -f $standins/lib/libcuda.so.1 ]]; then
    (cd "$repo" && mvn -B -q -DskipTests -pl cuda-kernels -am process-test-classes)
fi
rm -rf "$work/standin-context" && mkdir -p "$work/standin-context"
cp -r "$standins/lib" "$standins/image" "$work/standin-context/"
bud=(buildah "${storage[@]}" bud --isolation chroot --layers)
"${bud[@]}" -f "$repo/scripts/container/standin-cuda.Containerfile" -t localhost/fsdp4j-standin-cuda:13.1 \
    "$work/standin-context" >"$out/build-standin-base.log" 2>&1 || { tail -20 "$out/build-standin-base.log"; exit 1; }

# a fixed port: the mirror's URL is a build argument, and another URL would miss every cached layer
port=${MIRROR_PORT:-28417}
(cd "$HOME/.m2/repository" && exec python3 -m http.server "$port" --bind 127.0.0.1 >"$out/maven-mirror.log" 2>&1) &
mirror_pid=$!
trap 'kill $mirror_pid 2>/dev/null || true' EXIT
revision=${REVISION:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)}
build_image() {   # TAG RUNTIME_BASE CONTEXT LOG
    local t0=$SECONDS
    "${bud[@]}" --build-arg BUILD_BASE=localhost/debian:bookworm --build-arg RUNTIME_BASE="$2" \
        --build-arg MAVEN_MIRROR="http://127.0.0.1:$port" --build-arg REVISION="$revision" \
        -f "$repo/Dockerfile" -t "$1" "$3" >"$4" 2>&1 || { tail -30 "$4"; return 1; }
    say "   $1 built in $((SECONDS - t0)) s (log: $4)"
}
say "4/6 buildah bud: the CPU image and the GPU image on the stand-in CUDA"
build_image localhost/fsdp4j-cpu localhost/debian:bookworm "$repo" "$out/build-cpu.log"
build_image localhost/fsdp4j-gpu-standin localhost/fsdp4j-standin-cuda:13.1 "$repo" "$out/build-gpu-standin.log"

say "5/6 cases (podman, runc)"
run=(podman "${storage[@]}" run --rm --runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
# as Docker's --read-only --tmpfs /tmp: nothing else writable (podman would add tmpfs on /run, /var/tmp)
readonly_anyuid=(--user 12345:12345 --read-only --read-only-tmpfs=false --tmpfs /tmp:rw,noexec,nosuid,nodev)
vol=$work/volume-12345
rm -rf "$vol" && mkdir -p "$vol" && chown 12345:12345 "$vol"
tiny_gpu=(--steps 2 --batch-size 2 --seq-len 16)
passed=0 failed=0
# check NAME RC PATTERN PODMAN-ARGS... : the case passes when podman run exits RC and its output
# has a line matching PATTERN (an extended regex)
check() {
    local name=$1 rc=$2 pattern=$3 got t0=$SECONDS
    shift 3
    set +e
    "${run[@]}" "$@" >"$out/cases/$name.log" 2>&1
    got=$?
    set -e
    if [[ $got == "$rc" ]] && grep -qE -- "$pattern" "$out/cases/$name.log"; then
        passed=$((passed + 1)); printf 'PASS  %-28s exit %-3s %4d s\n' "$name" "$got" $((SECONDS - t0))
    else
        failed=$((failed + 1)); printf 'FAIL  %-28s exit %s (wanted %s and /%s/; log: %s)\n' "$name" "$got" "$rc" \
            "$pattern" "$out/cases/$name.log"
        tail -5 "$out/cases/$name.log" | sed 's/^/      /'
    fi
}
cpu=localhost/fsdp4j-cpu gpu=localhost/fsdp4j-gpu-standin
check cpu-train 0 '^done: 5 steps' $cpu train --device cpu --steps 5
check cpu-jvm-flags 0 'UseSerialGC' -e FSDP4J_JAVA_OPTS=-XX:+PrintCommandLineFlags $cpu --version
check cpu-launch-2-processes 0 '^done: 3 steps' \
    $cpu launch --standalone --nproc-per-node 2 -- train --device cpu --world-size 4 --steps 3
check cpu-any-uid-read-only 0 '^summary: .*charts: .*loss.png' "${readonly_anyuid[@]}" -v "$vol:/workspace" \
    $cpu train --device cpu --steps 3 --out /workspace/cpu-run --save-every 3 --save-dir /workspace/cpu-ckpt
check cpu-checkpoint-inspect 0 'step-00000003' "${readonly_anyuid[@]}" -v "$vol:/workspace" \
    $cpu checkpoint inspect /workspace/cpu-ckpt
check cpu-read-only-no-volume 1 '^error: .*/workspace/run' "${readonly_anyuid[@]}" \
    $cpu train --device cpu --steps 1 --out /workspace/run
check cpu-plan 0 'per GPU' $cpu plan --preset gpt2-124m --gpus 8
# DJL's tokenizers library comes pre-extracted: tokenizing, as any user on a read-only root, writes nothing but the shards
cp "$repo/runtime-core/src/test/resources/tokenizers/llama-style-tokenizer.json" "$vol/tokenizer.json"
cp "$repo/README.md" "$vol/text.txt" && chown 12345:12345 "$vol"/*
check cpu-tokenize-read-only 0 '^train: [0-9]+ tokens in 1 shards' "${readonly_anyuid[@]}" -v "$vol:/workspace" \
    $cpu data tokenize --tokenizer /workspace/tokenizer.json --out /workspace/shards /workspace/text.txt
check cpu-generate-read-only 0 '^generated 8 tokens' "${readonly_anyuid[@]}" -v "$vol:/workspace" \
    $cpu generate --from /workspace/cpu-ckpt --prompt 'The ' --max-new-tokens 8 --device cpu
check gpu-train-1 0 '^done: 2 steps' $gpu train --device cuda "${tiny_gpu[@]}"
check gpu-train-2-gpus 0 '^done: 2 steps' $gpu train --device cuda --world-size 2 "${tiny_gpu[@]}"
check gpu-launch-2-processes 0 '^done: 2 steps' \
    $gpu launch --standalone --nproc-per-node 2 -- train --device cuda --world-size 2 "${tiny_gpu[@]}"
check gpu-any-uid-read-only 0 '^done: 2 steps' "${readonly_anyuid[@]}" -v "$vol:/workspace" \
    $gpu train --device cuda --world-size 2 "${tiny_gpu[@]}" --save-every 2 --save-dir /workspace/gpu-ckpt
check gpu-checkpoint-inspect 0 'step-00000002' "${readonly_anyuid[@]}" -v "$vol:/workspace" \
    $gpu checkpoint inspect /workspace/gpu-ckpt
check gpu-plan 0 'per GPU' $gpu plan --preset gpt2-124m --gpus 8 --gpu H100-80GB
check gpu-driver-too-old 1 '^error: .*12\.4.*13\.1' -e FSDP4J_STANDIN_DRIVER_VERSION=12040 \
    $gpu train --device cuda "${tiny_gpu[@]}"

say "6/6 a source change rebuilds only the project; the images"
ctx=$work/rebuild-context
rm -rf "$ctx" && mkdir -p "$ctx"
tar -C "$repo" --exclude=./.git --exclude='./runs' --exclude='*/target' -c . | tar -C "$ctx" -x
echo "// container-check: a source change" >>"$ctx/samples/src/main/java/org/fsdp4j/cli/Main.java"
before=$(grep -c '"GET ' "$out/maven-mirror.log" || true)
t0=$SECONDS
build_image localhost/fsdp4j-cpu-rebuilt localhost/debian:bookworm "$ctx" "$out/build-rebuild.log"
downloads=$(( $(grep -c '"GET ' "$out/maven-mirror.log" || true) - before ))
# the dependency step (the build on the poms alone, -Dexec.skip=true) must come from the cache
deps_cached=$(awk '/STEP [0-9].*-Dexec.skip=true/ {s = 1; next} /STEP [0-9]/ {s = 0} s && /Using cache/ {print "yes"; exit}' \
    "$out/build-rebuild.log")
if [[ $deps_cached == yes && $downloads == 0 ]]; then
    passed=$((passed + 1)); printf 'PASS  %-28s %d downloads  %4d s\n' rebuild-after-source-change "$downloads" $((SECONDS - t0))
else
    failed=$((failed + 1)); printf 'FAIL  %-28s %d downloads (log: %s)\n' rebuild-after-source-change "$downloads" "$out/build-rebuild.log"
fi
podman "${storage[@]}" rmi localhost/fsdp4j-cpu-rebuilt >/dev/null 2>&1 || true
podman "${storage[@]}" images --filter dangling=false --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | tee "$out/images.txt"
podman "${storage[@]}" history --format '{{.Size}}  {{.CreatedBy}}' $gpu | cut -c1-160 >"$out/history-gpu-standin.txt"
podman "${storage[@]}" inspect --format '{{json .Labels}}' $gpu >"$out/labels.json"
say "done: $passed passed, $failed failed"
[[ $failed == 0 ]]
