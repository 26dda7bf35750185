// Every -Dfsdp4j.* switch in one place, with what it does, its default and how its value is read,
// so that a user (FSDP4J_JAVA_OPTS) and a reader find them all here, and no other class names one.
// They are for comparisons, debugging and tests, not for training: a knob a run needs is a flag.
// Each is read when the part it switches starts (a backend, an engine, a group, a save), never
// per op; the few read into a constant are read once, when their class loads.
package org.fsdp4j.backend;

import java.util.OptionalLong;

public final class Fsdp4jSystemProperties {

    /** -Dfsdp4j.opTimes=true: backends time every op and print a table when the JVM exits (default false). */
    public static final String OP_TIMES = "fsdp4j.opTimes";
    /** -Dfsdp4j.debugStreams=true: the default of --debug-streams (default false). */
    public static final String DEBUG_STREAMS = "fsdp4j.debugStreams";
    /** -Dfsdp4j.coreShare=false: idle CPU threads stop taking chunks of other threads' loops (default on). */
    public static final String CORE_SHARE = "fsdp4j.coreShare";
    /** -Dfsdp4j.jitDirectives=false: the JIT directive for the CPU kernels is not installed (default on). */
    public static final String JIT_DIRECTIVES = "fsdp4j.jitDirectives";
    /** -Dfsdp4j.cpuGemm=java|openblas: which GEMM the CPU backend uses for fp32 (default: chosen per CPU). */
    public static final String CPU_GEMM = "fsdp4j.cpuGemm";
    /** -Dfsdp4j.tile=6x4|4x3: the Java GEMM's register tile (default: chosen per CPU). */
    public static final String TILE = "fsdp4j.tile";
    /** -Dfsdp4j.inPlaceGather=false: ranks sharing memory gather into buffers of their own, as across processes (default on). */
    public static final String IN_PLACE_GATHER = "fsdp4j.inPlaceGather";
    /** -Dfsdp4j.sharedMemory=false: processes of one host talk over TCP instead of shared-memory rings (default on). */
    public static final String SHARED_MEMORY = "fsdp4j.sharedMemory";
    /** -Dfsdp4j.cuda.tf32=true: fp32 GEMMs on the GPU may use TF32 (default false). */
    public static final String CUDA_TF32 = "fsdp4j.cuda.tf32";
    /** -Dfsdp4j.cuda.cublasWorkspaceMiB=N: cuBLAS's workspace per stream (default: the backend's). */
    public static final String CUDA_CUBLAS_WORKSPACE_MIB = "fsdp4j.cuda.cublasWorkspaceMiB";
    /** -Dfsdp4j.ncclIssueOrder=chained|implicit|unordered: how NCCL collectives are ordered (default: by NCCL's version). */
    public static final String NCCL_ISSUE_ORDER = "fsdp4j.ncclIssueOrder";
    /** -Dfsdp4j.plainSteps=true: one line per step, as without a console (default: a live line on a console). */
    public static final String PLAIN_STEPS = "fsdp4j.plainSteps";
    /** Tests: -Dfsdp4j.checkpoint.chunkDelayMs=N sleeps N ms after each chunk a save writes (default 0). */
    public static final String CHECKPOINT_CHUNK_DELAY_MS = "fsdp4j.checkpoint.chunkDelayMs";
    /** Tests: -Dfsdp4j.test.pauseAt=NAME[@P] holds a process at a named point (FaultPoint). */
    public static final String TEST_PAUSE_AT = "fsdp4j.test.pauseAt";
    /** Tests: -Dfsdp4j.test.resetPeerConnectionAt=K resets a peer connection at the K-th exchange (default 0: never). */
    public static final String TEST_RESET_PEER_CONNECTION_AT = "fsdp4j.test.resetPeerConnectionAt";

    private Fsdp4jSystemProperties() {
    }

    /** Whether backends time their ops. */
    public static boolean opTimes() {
        return Boolean.getBoolean(OP_TIMES);
    }

    /** The default of --debug-streams. */
    public static boolean debugStreams() {
        return Boolean.getBoolean(DEBUG_STREAMS);
    }

    /** Whether idle CPU threads help with other threads' loops. */
    public static boolean coreShare() {
        return !"false".equalsIgnoreCase(System.getProperty(CORE_SHARE, ""));
    }

    /** Whether the CPU kernels' JIT directive is installed. */
    public static boolean jitDirectives() {
        return Boolean.parseBoolean(System.getProperty(JIT_DIRECTIVES, "true"));
    }

    /** The fp32 GEMM asked for ("java", "openblas"), or "" to let the backend choose. */
    public static String cpuGemm() {
        return System.getProperty(CPU_GEMM, "");
    }

    /** The Java GEMM's tile asked for ("6x4", "4x3"), or "" to let the backend choose. */
    public static String tile() {
        return System.getProperty(TILE, "");
    }

    /** Whether ranks that share memory gather in place. */
    public static boolean inPlaceGather() {
        return !"false".equals(System.getProperty(IN_PLACE_GATHER));
    }

    /** Whether processes of one host may use shared-memory rings. */
    public static boolean sharedMemory() {
        return !"false".equalsIgnoreCase(System.getProperty(SHARED_MEMORY, ""));
    }

    /** Whether fp32 GEMMs on the GPU may use TF32. */
    public static boolean cudaTf32() {
        return Boolean.parseBoolean(System.getProperty(CUDA_TF32, "false"));
    }

    /** cuBLAS's workspace in MiB, if asked for; a value that is not a whole number is an IllegalArgumentException. */
    public static OptionalLong cudaCublasWorkspaceMiB() {
        String mib = System.getProperty(CUDA_CUBLAS_WORKSPACE_MIB);
        if (mib == null) {
            return OptionalLong.empty();
        }
        try {
            return OptionalLong.of(Long.parseLong(mib.trim()));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(CUDA_CUBLAS_WORKSPACE_MIB + " must be a whole number of MiB, got '" + mib + "'");
        }
    }

    /** The NCCL issue order asked for, or "" to choose by NCCL's version. */
    public static String ncclIssueOrder() {
        return System.getProperty(NCCL_ISSUE_ORDER, "");
    }

    /** Whether steps print as plain lines even on a console. */
    public static boolean plainSteps() {
        return Boolean.getBoolean(PLAIN_STEPS);
    }

    /** Milliseconds a save sleeps after each chunk (tests: time to kill a process mid-save). */
    public static long checkpointChunkDelayMs() {
        return Long.getLong(CHECKPOINT_CHUNK_DELAY_MS, 0);
    }

    /** The fault point to pause at ("NAME" or "NAME@P"), or null. */
    public static String testPauseAt() {
        return System.getProperty(TEST_PAUSE_AT);
    }

    /** The exchange at which a peer connection is reset (0: never). */
    public static long testResetPeerConnectionAt() {
        return Long.getLong(TEST_RESET_PEER_CONNECTION_AT, 0);
    }
}
