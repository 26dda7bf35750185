#!/usr/bin/env bash
# Runs a command against the stand-in CUDA, cuBLAS and NCCL libraries of the test build
# (cuda-kernels/src/test/standin): host memory and the CUDA execution emulator, NOT a GPU. For
# trying the whole --device cuda path on a machine without one, e.g.
#   scripts/with-standins.sh ./fsdp4j train --device cuda --steps 5 --batch-size 4 --seq-len 32
#   FSDP4J_STANDIN_DEVICES=2 scripts/with-standins.sh ./fsdp4j train --device cuda --world-size 2 ...
# It builds the stand-ins when they are missing (g++ needed), then points JavaCPP's link path at
# them (FSDP4J_JAVA_OPTS, with an extraction cache of their own) and puts the stand-in kernel image
# on the class path (FSDP4J_CLASSPATH, behind the jar's real fatbin when nvcc built one). Kernels
# run emulated, thread by thread: keep models and batches small. Nothing else ever loads them.
#   FSDP4J_STANDIN_DEVICES      devices to report (default 2)
#   FSDP4J_STANDIN_MEMORY_MIB   memory per device (default 4096)
#   FSDP4J_STANDIN_JITTER=1     random delays on every stream (the fake-GPU tests set it)
#   FSDP4J_STANDIN_DRIVER_VERSION  the CUDA the driver supports, e.g. 12040 (default 13010); below
#                                  13000 the runtime fails with cudaErrorInsufficientDriver
#   FSDP4J_STANDIN_NCCL_TIMEOUT_S  how long a rank waits for the others before ncclSystemError (600)
#   FSDP4J_STANDIN_NCCL_SLOTS=k    NCCL collectives a device runs at once (default: any number)
#   NCCL_LAUNCH_ORDER_IMPLICIT=1   a device's collectives start in the order the host issued them
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$repo/cuda-kernels/target/cuda-standins
if [[ $# -eq 0 ]]; then
  echo "usage: scripts/with-standins.sh COMMAND [ARGS...]   (e.g. ./fsdp4j train --device cuda)" >&2
  exit 2
fi
if [[ ! -f $dir/lib/libcuda.so.1 ]]; then
  echo "with-standins: building the stand-ins (mvn -pl cuda-kernels -am process-test-classes) ..." >&2
  (cd "$repo" && mvn -B -q -DskipTests -pl cuda-kernels -am process-test-classes >&2)
fi
if [[ -f $dir/UNAVAILABLE ]]; then
  echo "with-standins: the stand-ins could not be built: $(cat "$dir/UNAVAILABLE")" >&2
  exit 1
fi
export FSDP4J_STANDIN_DEVICES=${FSDP4J_STANDIN_DEVICES:-2}
export FSDP4J_JAVA_OPTS="-Dorg.bytedeco.javacpp.platform.linkpath=$dir/lib/ -Dorg.bytedeco.javacpp.cachedir=$dir/javacpp-cache ${FSDP4J_JAVA_OPTS:-}"
export FSDP4J_CLASSPATH=$dir/image${FSDP4J_CLASSPATH:+:$FSDP4J_CLASSPATH}
exec "$@"
