// Where a CPU step's time goes, op by op, to aim and check optimisations: with -Dfsdp4j.opTimes=true every op
// of every CPU backend in the JVM is timed where it runs (on the compute thread, or on a stream's
// worker), GEMMs per shape with their achieved GFLOP/s, and the table is printed to stderr when the
// JVM exits. Off by default: then the only cost is one static final boolean per op.
// Unlike a sampling profiler it sees native time (OpenBLAS) and Java time alike and exactly. Time a
// thread spends blocked on another stream's event (the compute waiting for an all-gather, a
// stream waiting for the compute) is not an op: it is summed apart, by who waited for which stream,
// and printed under the table. It also counts the bytes the thread running
// an op allocated meanwhile (not its pool helpers'): a vector loop that C2 left boxed allocates per
// vector, which shows up here as megabytes a call where a loop compiled well allocates a few
// kilobytes.
package org.fsdp4j.backend.cpu;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.LongSupplier;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.fsdp4j.backend.OpTiming;

final class OpTimes {

    static final boolean ENABLED = OpTiming.ENABLED;

    /** Calls, nanoseconds and (GEMMs) FLOPs of one op or GEMM shape. */
    private static final class Entry {
        final LongAdder calls = new LongAdder();
        final LongAdder nanos = new LongAdder();
        final LongAdder flops = new LongAdder();
        final LongAdder allocated = new LongAdder();
    }

    /** Bytes allocated by the current thread so far; -1 where the JVM does not count them. */
    private static final LongSupplier ALLOCATED = allocatedCounter();

    private static final Map<String, Entry> ENTRIES = new ConcurrentHashMap<>();
    /** Time blocked on events, by who waited (the threads that issue work, or the streams' workers) and for which stream. */
    private static final Map<String, Entry> WAITS = new ConcurrentHashMap<>();
    /** "all-gather-r1" and "all-gather-r0" are one row of the waits. */
    private static final java.util.regex.Pattern RANK_SUFFIX = java.util.regex.Pattern.compile("-r\\d+$");

    static {
        if (ENABLED) {
            OpTiming.onReset(OpTimes::reset);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.print(table()), "fsdp4j-op-times"));
        }
    }

    private OpTimes() {
    }

    /** {@code work}, timed under {@code key} when enabled. */
    static Runnable timed(String key, long flops, Runnable work) {
        if (!ENABLED) {
            return work;
        }
        return () -> {
            long a0 = ALLOCATED.getAsLong();
            long t0 = System.nanoTime();
            try {
                work.run();
            } finally {
                long ns = System.nanoTime() - t0;
                long bytes = ALLOCATED.getAsLong() - a0;
                Entry e = ENTRIES.computeIfAbsent(key, k -> new Entry());
                e.calls.increment();
                e.nanos.add(ns);
                e.flops.add(flops);
                e.allocated.add(Math.max(0, bytes));
            }
        };
    }

    private static LongSupplier allocatedCounter() {
        if (ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean bean
                && bean.isThreadAllocatedMemorySupported()) {
            if (!bean.isThreadAllocatedMemoryEnabled()) {
                bean.setThreadAllocatedMemoryEnabled(true);
            }
            return bean::getCurrentThreadAllocatedBytes;
        }
        return () -> -1;
    }

    /**
     * Counts {@code ns} spent by the current thread blocked on an event of stream {@code awaited}
     * (called only when enabled), by who waited and for which stream (its rank suffix dropped, so
     * the ranks' waits for the same kind of stream add up).
     */
    static void waited(long ns, String awaited) {
        String who = CpuStream.running() != null ? "stream workers" : "issuing threads";
        String key = who + " for " + RANK_SUFFIX.matcher(awaited).replaceAll("");
        Entry e = WAITS.computeIfAbsent(key, k -> new Entry());
        e.calls.increment();
        e.nanos.add(ns);
    }

    private static final String HELPED = "issuing threads: of which running other ranks' chunks";

    /** Counts {@code chunks} of other threads' loops run in {@code ns} by a thread blocked on an event (CoreShare). */
    static void helped(int chunks, long ns) {
        Entry e = WAITS.computeIfAbsent(HELPED, k -> new Entry());
        e.calls.add(chunks);
        e.nanos.add(ns);
    }

    /** Forgets what was timed so far (the step benchmark calls this after its warm-up steps). */
    static void reset() {
        ENTRIES.clear();
        WAITS.clear();
    }


    static String table() {
        List<Map.Entry<String, Entry>> rows = new ArrayList<>(ENTRIES.entrySet());
        rows.sort((a, b) -> Long.compare(b.getValue().nanos.sum(), a.getValue().nanos.sum()));
        double total = 0;
        for (Map.Entry<String, Entry> r : rows) {
            total += r.getValue().nanos.sum();
        }
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "# fsdp4j CPU op times (all ranks, all threads that ran ops; waits apart, below)%n"));
        if (WAITS.containsKey(HELPED)) {
            // helping skews them: at L8, N = 2, the GEMMs read 5-20% slower with it on than off, at the same step time
            sb.append(String.format(Locale.ROOT, "# blocked ranks ran other ranks' GEMM row blocks (CoreShare): GEMM times are the"
                    + " issuing thread's wall time, not per-core rates; -Dfsdp4j.coreShare=false gives those%n"));
        }
        sb.append(String.format(Locale.ROOT, "# %-58s %9s %11s %7s %9s %12s%n", "op", "calls", "total(ms)", "share", "GFLOP/s",
                "KiB/call"));
        for (Map.Entry<String, Entry> r : rows) {
            Entry e = r.getValue();
            double ns = e.nanos.sum();
            long flops = e.flops.sum();
            sb.append(String.format(Locale.ROOT, "  %-58s %9d %11.1f %6.1f%% %9s %12.1f%n", r.getKey(), e.calls.sum(), ns / 1e6,
                    100 * ns / Math.max(1, total), flops == 0 ? "" : String.format(Locale.ROOT, "%.1f", flops / ns),
                    e.allocated.sum() / 1024.0 / Math.max(1, e.calls.sum())));
        }
        if (!WAITS.isEmpty()) {
            sb.append(String.format(Locale.ROOT, "# blocked on another stream's event (not in the total above)%n"));
            WAITS.entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(w -> sb.append(String.format(Locale.ROOT,
                    "  %-58s %9d %11.1f%n", "waits of " + w.getKey(), w.getValue().calls.sum(), w.getValue().nanos.sum() / 1e6)));
        }
        return sb.toString();
    }
}
