#!/usr/bin/env bash
# Builds every src/main/cuda/*.cu into ONE fatbin (machine code for each GPU generation we
# support, plus PTX so newer GPUs can JIT it), which the cuda-kernels jar carries as a
# resource and CudaModule loads with cuModuleLoadData. Maven runs this in generate-resources.
#
# usage: build-fatbin.sh CUDA_SOURCE_DIR OUTPUT_FATBIN WORK_DIR [PRESETS_CUDA_VERSION]
# Without nvcc (not on PATH, not in $CUDA_HOME/bin) it says so once and exits 0: the build
# goes on CPU-only. With nvcc, any compile error fails the build.
set -euo pipefail

src_dir=$1
out=$2
work_dir=$3
presets_cuda=${4:-}   # the cuda presets' version, e.g. 13.1-9.19-1.5.13

sass_archs="80 86 89 90 100"   # A100, A10/3090, L4/4090, H100/H200, B200
ptx_arch=90                    # JIT fallback for GPUs newer than the list

nvcc_bin=$(command -v nvcc || true)
if [[ -z $nvcc_bin && -n ${CUDA_HOME:-} && -x $CUDA_HOME/bin/nvcc ]]; then
  nvcc_bin=$CUDA_HOME/bin/nvcc
fi
if [[ -z $nvcc_bin ]]; then
  echo "[fsdp4j] nvcc not found: building without GPU kernels (CPU only)"
  rm -f "$out"
  exit 0
fi

# A driver of the presets' CUDA major may not load kernels of a newer nvcc major (a CUDA 14 nvcc with the CUDA 13 presets).
nvcc_release=$("$nvcc_bin" --version | tail -n 2 | head -n 1)
nvcc_major=$(sed -n 's/.*release \([0-9]*\)\..*/\1/p' <<<"$nvcc_release")
if [[ -n $presets_cuda && -n $nvcc_major && $nvcc_major -gt ${presets_cuda%%.*} ]]; then
  echo "[fsdp4j] $nvcc_bin is CUDA $nvcc_major's but this build is for CUDA ${presets_cuda%%-*}: put that CUDA's nvcc" \
    "on PATH or set CUDA_HOME to it" >&2
  exit 1
fi

shopt -s nullglob
sources=("$src_dir"/*.cu)
if [[ -f $out ]]; then
  stale=0
  for f in "${sources[@]}" "$src_dir"/*.cuh "$0" "$(dirname "$0")/write-unity.sh"; do
    [[ $f -nt $out ]] && stale=1
  done
  [[ $(cat "$work_dir/nvcc-release" 2>/dev/null) == "$nvcc_release" ]] || stale=1   # another nvcc since
  if [[ $stale == 0 ]]; then
    echo "[fsdp4j] GPU kernels up to date: $out"
    exit 0
  fi
fi

# One translation unit that includes every kernel file: one fatbin, one module to load.
mkdir -p "$work_dir" "$(dirname "$out")"
unity=$work_dir/fsdp4j_kernels.cu
bash "$(dirname "$0")/write-unity.sh" "$src_dir" "$unity"

gencode=()
for a in $sass_archs; do
  gencode+=(-gencode "arch=compute_$a,code=sm_$a")
done
gencode+=(-gencode "arch=compute_$ptx_arch,code=compute_$ptx_arch")

echo "[fsdp4j] nvcc: $nvcc_release"
echo "[fsdp4j] building ${#sources[@]} kernel files for sm_${sass_archs// /, sm_} + compute_$ptx_arch PTX"
start_s=$SECONDS
"$nvcc_bin" -fatbin -O3 -std=c++17 -Werror all-warnings -I"$src_dir" "${gencode[@]}" \
  --threads "$(nproc)" -o "$out.tmp" "$unity"
mv "$out.tmp" "$out"
echo "$nvcc_release" >"$work_dir/nvcc-release"
echo "[fsdp4j] wrote $out ($(stat -c %s "$out") bytes) in $((SECONDS - start_s)) s"
