// How a backend is to be built, beyond its device and memory tracker: one immutable value that
// the command line, the trainer and the tests all pass the same way.
//
// debugStreams: every CPU stream runs on its own worker with random delays and freed memory is
// poisoned before reuse, so that work not ordered by an event fails visibly (the engine tests
// run this way). The system property fsdp4j.debugStreams=true turns it on for every backend
// built with defaults(); the command line's --debug-streams sets it per run. The CUDA backend
// has real streams and ignores it.
package org.fsdp4j.backend;

/**
 * @param cpuThreads   host threads a CPU backend may keep busy (0 = all cores)
 * @param debugStreams see the file comment
 */
public record BackendOptions(int cpuThreads, boolean debugStreams) {

    /** The most CPU threads a backend may be given (far above any machine; it keeps the arithmetic in int). */
    public static final int MAX_CPU_THREADS = 0x7fff;

    public BackendOptions {
        if (cpuThreads < 0 || cpuThreads > MAX_CPU_THREADS) {
            throw new IllegalArgumentException("cpuThreads must be between 0 (all cores) and " + MAX_CPU_THREADS
                    + ", got " + cpuThreads);
        }
    }

    /** {@code cpuThreads} threads, debug streams as the system property says. */
    public static BackendOptions defaults(int cpuThreads) {
        return new BackendOptions(cpuThreads, Fsdp4jSystemProperties.debugStreams());
    }

    /**
     * Host threads per rank so that {@code ranksOnThisMachine} ranks fill the machine's cores
     * without oversubscribing them (at least one each).
     */
    public static int threadsPerRank(int ranksOnThisMachine) {
        return Math.max(1, Runtime.getRuntime().availableProcessors() / ranksOnThisMachine);
    }

    public BackendOptions withDebugStreams(boolean on) {
        return new BackendOptions(cpuThreads, on);
    }
}
