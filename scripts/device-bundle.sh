#!/usr/bin/env bash
# Builds, on this machine, everything scripts/gpu-check.sh needs on a GPU machine that has no
# Java, no Maven and no internet: the jars (main + test classes and their runtime
# dependencies), the JUnit console launcher, and a jlink'd Java runtime, in .bundle/, packed into
# .bundle-pack/bundle.tar.xz (both ignored by git; the archive is what travels). Run from
# anywhere; takes ~2-3 min.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bundle=$repo/.bundle
pack=$repo/.bundle-pack   # what the device tool carries (see the end)
max_mib=52                # packed; the tracked tree (~5 MiB) travels beside it under the 64 MiB limit
junit_console=org.junit.platform:junit-platform-console-standalone:1.14.1   # JUnit 5.14.1's platform

cd "$repo"
rm -rf "$bundle"
mkdir -p "$bundle/lib"

echo "[bundle] building cuda-kernels, nccl-comm and samples (and the modules they need) with Maven"
# Runtime scope only: JUnit comes as the console launcher below, which carries its own copy.
# No sources or javadoc jars: the GPU machine runs classes, and they would not fit the carry limit.
nodocs="-Dmaven.javadoc.skip=true -Dmaven.source.skip=true"
mvn -B -q -pl cuda-kernels,nccl-comm,samples -am package -DskipTests -DskipStandIns $nodocs \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$bundle/lib"
mvn -B -q -pl cuda-kernels,nccl-comm -am test-compile $nodocs
# runtime-core-*-tests.jar comes too: the GPU parity test extends its GptParityChecks and reads its
# dumps, and the GPU equivalence test uses the engine tests' support.
cp $(ls runtime-core/target/runtime-core-*.jar cuda-kernels/target/cuda-kernels-*.jar nccl-comm/target/nccl-comm-*.jar \
  | grep -v -e '-sources\.jar$' -e '-javadoc\.jar$') \
  "$bundle/lib/"
[[ -f $(ls runtime-core/target/runtime-core-*-tests.jar) ]]
jar --create --file "$bundle/lib/cuda-kernels-tests.jar" -C cuda-kernels/target/test-classes .
jar --create --file "$bundle/lib/nccl-comm-tests.jar" -C nccl-comm/target/test-classes .
cp $(ls samples/target/samples-*.jar | grep -v -e '-sources\.jar$' -e '-javadoc\.jar$') "$bundle/lib/"   # the fsdp4j CLI: gpu-check runs bench gemm and bench step with it

echo "[bundle] fetching the JUnit console launcher ($junit_console)"
mvn -B -q dependency:copy -Dartifact="$junit_console" -DoutputDirectory="$bundle" -Dmdep.stripVersion=true

if ! unzip -l "$bundle/lib/cuda-kernels-"*[0-9T].jar 2>/dev/null | grep -q fsdp4j_kernels.fatbin; then
  echo "[bundle] WARNING: the cuda-kernels jar has no fatbin (nvcc was missing): the GPU tests will skip" >&2
fi

echo "[bundle] slimming the native jars to the libraries fsdp4j loads"
# OpenBLAS: fsdp4j uses the openblas_nolapack preset only (libjniopenblas_nolapack + libopenblas).
zip -q -d "$bundle"/lib/openblas-*-linux-x86_64.jar 'org/bytedeco/openblas/linux-x86_64/libjniopenblas.so' \
  'org/bytedeco/openblas/linux-x86_64/libjniopenblas_full.so' 'org/bytedeco/openblas/linux-x86_64/include/*'
# CUDA: the JNI wrappers of cudart, cuBLAS, NCCL and NVRTC; not cuDNN, cuFFT, NPP, ...
cuda_native=$(ls "$bundle"/lib/cuda-*-linux-x86_64.jar)
unused=$(unzip -Z1 "$cuda_native" | grep -E '/libjni[a-z_]+\.so$' | grep -vE '/libjni(cudart|cublas|nccl|nvrtc)\.so$')
zip -q -d "$cuda_native" $unused

# The chart library: the bundle's runtime has no java.desktop, so train skips its charts and never
# loads it. The cuda-kernels test jar that copy-dependencies brings duplicates cuda-kernels-tests.jar.
rm -f "$bundle"/lib/jfreechart-*.jar "$bundle"/lib/cuda-kernels-*-tests.jar

echo "[bundle] linking a Java runtime with only the modules the jars use"
# java.desktop is an optional extra of Jackson that fsdp4j never touches.
# java.logging, java.xml and java.sql: the JUnit console launcher (logging, XML reports).
# jdk.incubator.vector: the CPU backend's element-wise ops (the Vector API).
# jdk.management: com.sun.management's OperatingSystemMXBean, the preflight's free host memory.
# Not java.desktop (11 MiB): train then skips its PNG charts and says so (ChartSupport).
modules=java.base,java.logging,java.management,java.sql,java.xml,jdk.incubator.vector,jdk.management,jdk.unsupported,jdk.zipfs   # Unsafe: JavaCPP
java_home=$(dirname "$(dirname "$(readlink -f "$(command -v jlink)")")")
jlink --module-path "$java_home/jmods" --add-modules "$modules" --strip-debug --no-man-pages \
  --no-header-files --compress=2 --output "$bundle/jre"
strip --strip-unneeded "$bundle/jre/lib/server/libjvm.so"   # Debian ships it with its symbol table

du -sh "$bundle"/jre "$bundle"/lib "$bundle"/*.jar | sed 's/^/[bundle] /'
echo "[bundle] $(du -sm "$bundle" | cut -f1) MiB unpacked in $bundle"

# What travels is one xz archive: the unpacked bundle (~61 MiB) plus the tracked tree would pass
# the device tool's 64 MiB carry limit; packed it is about half. gpu-check.sh unpacks it.
echo "[bundle] packing it into $pack/bundle.tar.xz"
rm -rf "$pack"
mkdir -p "$pack"
tar -C "$repo" --exclude=.bundle/out -cf - .bundle | xz -T0 -6 > "$pack/bundle.tar.xz"
size_mib=$(( ($(stat -c %s "$pack/bundle.tar.xz") + 1048575) / 1048576 ))
echo "[bundle] packed: ${size_mib} MiB; carry .bundle-pack, then run: bash scripts/gpu-check.sh"
if (( size_mib > max_mib )); then
  echo "[bundle] over the ${max_mib} MiB budget" >&2
  exit 1
fi
