#!/bin/sh
# The one JVM command line of fsdp4j. ./fsdp4j (in the repository) and the container image
# (installed as /usr/local/bin/fsdp4j) both run this file, so the two cannot start the JVM with
# different flags again; LauncherFlagsTest fails the build if either stops using it.
# POSIX sh: minimal bases have no bash.
#   FSDP4J_JAR         the fat jar to run, or a class path holding fsdp4j (gpu-check's bundle) (required)
#   FSDP4J_JAVA        the java binary (default: $JAVA_HOME/bin/java, else java on PATH)
#   FSDP4J_NATIVE_DIR  a folder holding the native libraries already extracted from the jar (the
#                      image has one): they load from there, so no writable, executable cache is
#                      needed (JavaCPP otherwise extracts them under ~/.javacpp on first use)
#   FSDP4J_JAVA_OPTS   more JVM options, after these (so they win)
#   FSDP4J_CLASSPATH   class path entries after the jar (scripts/with-standins.sh puts the
#                      stand-in kernel image there)
set -eu
jar=${FSDP4J_JAR:?"set FSDP4J_JAR to fsdp4j.jar"}
if [ -n "${FSDP4J_JAVA:-}" ]; then java=$FSDP4J_JAVA
elif [ -n "${JAVA_HOME:-}" ]; then java=$JAVA_HOME/bin/java
else java=java
fi

# The JVM decodes file names in its arguments with the locale's charset: under a locale that is
# not UTF-8 (LANG=C), a non-ASCII --data path arrives mangled. Run the JVM under C.UTF-8 then,
# where the system has it (fsdp4j's messages and number formats do not depend on the locale).
if [ "$(locale charmap 2>/dev/null || true)" != "UTF-8" ]; then
    utf8=$(locale -a 2>/dev/null | grep -iE '^c\.utf-?8$' | head -n 1 || true)
    if [ -n "$utf8" ]; then export LC_ALL="$utf8"; fi
fi

# NCCL >= 2.26 launches each GPU's collectives in the order the host issued them (several
# communicators then cannot deadlock each other; nccl-comm's IssueOrder): fsdp4j issues them in one
# order on every rank, so it asks for that unless the environment says otherwise.
export NCCL_LAUNCH_ORDER_IMPLICIT="${NCCL_LAUNCH_ORDER_IMPLICIT:-1}"

# maxPhysicalBytes=0: JavaCPP must not cap off-heap memory by the heap size (tensors live off-heap).
# jdk.incubator.vector: the CPU backend's element-wise ops use the Vector API; the JVM announces the
# incubator module with one WARNING line on stderr at start.
# The serial collector unless FSDP4J_JAVA_OPTS picks one: the heap holds only small objects (tensors
# live off-heap), and G1 grew it to ~0.9 GiB for a 8 MiB live set, tripling the process's peak RSS
# (bench-4x256: ~1 GiB with G1, ~350 MiB serial; young pauses under 1 ms). With it a 32 MiB young
# generation: the default (a third of 1/64 of RAM, ~110 MiB here) is all touched between collections,
# so it is resident; 32 MiB cut 80-95 MiB of peak RSS at the same step time.
# A -Xmn in FSDP4J_JAVA_OPTS comes later on the command line and wins. And with it C2's safepoint
# polls in counted loops, strip-mined (G1's default, off for the serial collector): without them C2
# compiled the CPU backend's vector loops 2-16x slower (an fp64 vector sum of 256 floats 441 vs 27 ns,
# the attention's tile GEMM 57 vs 150 GFLOP/s).
gc="-XX:+UseSerialGC -Xmn32m -XX:+UseCountedLoopSafepoints -XX:LoopStripMiningIter=1000"
case "${FSDP4J_JAVA_OPTS:-}" in *-XX:+Use*GC*) gc= ;; esac

# pathsFirst: JavaCPP loads a library from java.library.path before it tries to extract the jar's copy.
native=
if [ -n "${FSDP4J_NATIVE_DIR:-}" ]; then
    native="-Djava.library.path=$FSDP4J_NATIVE_DIR -Dorg.bytedeco.javacpp.pathsFirst=true"
fi

# shellcheck disable=SC2086 # $gc, $native and FSDP4J_JAVA_OPTS are lists of options
exec "$java" -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 --add-modules jdk.incubator.vector $gc $native \
    ${FSDP4J_JAVA_OPTS:-} -cp "$jar${FSDP4J_CLASSPATH:+:$FSDP4J_CLASSPATH}" org.fsdp4j.cli.Main "$@"
