// The switch and the reset shared by the backends' per-op timing tables (the CPU's OpTimes, the
// GPU's GpuOpTimes): -Dfsdp4j.opTimes=true turns every backend's table on, and the step
// benchmark resets them all after its warm-up without knowing which backends exist.
package org.fsdp4j.backend;

import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;

public final class OpTiming {

    /** -Dfsdp4j.opTimes=true: backends time their ops and print a table when the JVM exits. */
    public static final boolean ENABLED = Fsdp4jSystemProperties.opTimes();

    private static final List<Runnable> RESETS = new CopyOnWriteArrayList<>();

    private OpTiming() {
    }

    /** Registers a table's reset (a backend's timing class does, once, when timing is on). */
    public static void onReset(Runnable reset) {
        RESETS.add(reset);
    }

    /** A GEMM's row in every table: transposes, shape, batch and dtypes. */
    public static String gemmKey(boolean transA, boolean transB, int m, int n, int k, int batch, String dtypes) {
        return String.format(Locale.ROOT, "gemm %s%s m=%d n=%d k=%d batch=%d %s", transA ? "T" : "N",
                transB ? "T" : "N", m, n, k, batch, dtypes);
    }

    /** Forgets what every table timed so far: the step benchmark calls it after its warm-up. */
    public static void reset() {
        RESETS.forEach(Runnable::run);
    }
}
