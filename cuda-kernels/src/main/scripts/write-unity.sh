#!/usr/bin/env bash
# Writes the one translation unit that includes every kernel file of a source folder, in the
# shell's glob order. build-fatbin.sh compiles it with nvcc; the emulator tests compile the same
# file with g++ (src/test/emulator), so both see exactly the same kernels.
#
# usage: write-unity.sh CUDA_SOURCE_DIR OUTPUT_FILE
set -euo pipefail

src_dir=$1
out=$2

shopt -s nullglob
mkdir -p "$(dirname "$out")"
: > "$out"
for f in "$src_dir"/*.cu; do
  echo "#include \"$(cd "$(dirname "$f")" && pwd)/$(basename "$f")\"" >> "$out"
done
