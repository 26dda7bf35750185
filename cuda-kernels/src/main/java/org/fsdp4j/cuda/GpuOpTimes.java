// Where a GPU step's time goes, op by op: the CUDA twin of the CPU backend's OpTimes, so that a
// change's predicted gain is checked on the ops it targets. With -Dfsdp4j.opTimes=true every op a
// CudaBackend issues records a timing event on its stream as it is issued; an op's time is the
// GPU time from its event to the next one on the same stream, i.e. its kernels plus any idle gap
// before the next op arrived. After a host synchronisation the stream gets an "(idle: waiting for
// the host)" mark, so the time the GPU spends waiting for the host's next launch is counted apart.
// Marks are resolved without blocking, as the GPU passes them (cudaEventQuery), and their events
// reused: timing costs one cudaEventRecord per op and no host synchronisation. The table (GEMMs
// per shape with their TFLOP/s) goes to stderr when the JVM exits; the step benchmark resets it
// after its warm-up (OpTiming). Off by default: then the cost is one static final boolean per op.
package org.fsdp4j.cuda;

import static org.bytedeco.cuda.global.cudart.cudaErrorNotReady;
import static org.bytedeco.cuda.global.cudart.cudaEventCreate;
import static org.bytedeco.cuda.global.cudart.cudaEventElapsedTime;
import static org.bytedeco.cuda.global.cudart.cudaEventQuery;
import static org.bytedeco.cuda.global.cudart.cudaEventRecord;
import static org.bytedeco.cuda.global.cudart.cudaEventSynchronize;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.DoubleAdder;
import java.util.concurrent.atomic.LongAdder;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.fsdp4j.backend.OpTiming;

final class GpuOpTimes {

    static final boolean ENABLED = OpTiming.ENABLED;
    static final String IDLE = "(idle: waiting for the host)";

    /** Calls, GPU milliseconds and (GEMMs) FLOPs of one op or GEMM shape. */
    private static final class Entry {
        final LongAdder calls = new LongAdder();
        final DoubleAdder ms = new DoubleAdder();
        final LongAdder flops = new LongAdder();
    }

    /** One op's start on a stream: its key, FLOPs, timing event and the table generation it belongs to. */
    private record Mark(String key, long flops, CUevent_st event, int generation) {
    }

    /** A stream's marks not yet resolved, oldest first, and the events ready for reuse. */
    static final class Marks {
        private final ArrayDeque<Mark> pending = new ArrayDeque<>();
        private final ArrayDeque<CUevent_st> free = new ArrayDeque<>();
    }

    /** The JVM's table under -Dfsdp4j.opTimes=true, else null (the backend then marks nothing). */
    static final GpuOpTimes GLOBAL = ENABLED ? global() : null;

    private final Map<String, Entry> entries = new ConcurrentHashMap<>();
    private final AtomicInteger generation = new AtomicInteger();

    GpuOpTimes() {
    }

    private static GpuOpTimes global() {
        GpuOpTimes t = new GpuOpTimes();
        OpTiming.onReset(t::reset);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.print(t.table()), "fsdp4j-gpu-op-times"));
        return t;
    }

    /** Marks the start of op {@code key} (with {@code flops} of work) at the current end of {@code stream}. */
    void mark(CudaStream stream, String key, long flops) {
        Marks m = stream.opMarks();
        synchronized (m) {
            resolveDone(m, stream.device());
            CUevent_st e = m.free.isEmpty() ? newEvent(stream.device()) : m.free.pop();
            CudaCheck.check(cudaEventRecord(e, stream.handle()), "cudaEventRecord(op times)", stream.device());
            // Off the compute stream, the gap to the next mark also holds the stream's waits for
            // events (an all-gather stream idles until the compute frees a buffer): named apart.
            String booked = stream.name().equals("compute") ? key : key + " [" + stream.name() + " stream, waits included]";
            m.pending.add(new Mark(booked, flops, e, generation.get()));
        }
    }

    /** After the host waited for {@code stream}: what follows until the next op is idle time. */
    void afterHostWait(CudaStream stream) {
        if (!stream.isClosed()) {
            mark(stream, IDLE, 0);
        }
    }

    /** Before {@code stream} is destroyed: waits for its marks and books all but the last (which has no end). */
    void flush(CudaStream stream) {
        Marks m = stream.opMarks();
        synchronized (m) {
            if (m.pending.isEmpty()) {
                return;
            }
            CudaCheck.check(cudaEventSynchronize(m.pending.peekLast().event()), "cudaEventSynchronize(op times)",
                    stream.device());
            resolveDone(m, stream.device());
            m.pending.clear();   // the last mark: its op's end was never marked
        }
    }

    /** Books every mark whose successor the GPU has passed. */
    private void resolveDone(Marks m, int device) {
        while (m.pending.size() >= 2) {
            Iterator<Mark> it = m.pending.iterator();
            Mark first = it.next();
            Mark next = it.next();
            int rc = cudaEventQuery(next.event());
            if (rc == cudaErrorNotReady) {
                return;
            }
            CudaCheck.check(rc, "cudaEventQuery(op times)", device);
            float[] ms = {0};
            CudaCheck.check(cudaEventElapsedTime(ms, first.event(), next.event()), "cudaEventElapsedTime", device);
            if (first.generation() == generation.get()) {
                Entry e = entries.computeIfAbsent(first.key(), k -> new Entry());
                e.calls.increment();
                e.ms.add(ms[0]);
                e.flops.add(first.flops());
            }
            m.pending.pollFirst();
            m.free.push(first.event());
        }
    }

    private static CUevent_st newEvent(int device) {
        CUevent_st e = new CUevent_st();
        CudaCheck.check(cudaEventCreate(e), "cudaEventCreate(op times)", device);   // timing on
        return e;   // never destroyed: a few per stream, reused, alive while timing is on
    }

    /** Forgets what was booked so far; marks issued before are dropped as they resolve. */
    void reset() {
        generation.incrementAndGet();
        entries.clear();
    }

    /** Calls and GPU milliseconds booked under {@code key} so far (tests, reports). */
    double[] callsAndMs(String key) {
        Entry e = entries.get(key);
        return e == null ? new double[] {0, 0} : new double[] {e.calls.sum(), e.ms.sum()};
    }


    String table() {
        List<Map.Entry<String, Entry>> rows = new ArrayList<>(entries.entrySet());
        rows.sort((a, b) -> Double.compare(b.getValue().ms.sum(), a.getValue().ms.sum()));
        double total = 0;
        for (Map.Entry<String, Entry> r : rows) {
            total += r.getValue().ms.sum();
        }
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "# fsdp4j GPU op times (all streams of all CUDA backends; an op's time"
                + " runs from its start to the next op's on its stream)%n"));
        sb.append(String.format(Locale.ROOT, "# %-66s %9s %11s %7s %9s%n", "op", "calls", "total(ms)", "share",
                "TFLOP/s"));
        for (Map.Entry<String, Entry> r : rows) {
            Entry e = r.getValue();
            double ms = e.ms.sum();
            long flops = e.flops.sum();
            sb.append(String.format(Locale.ROOT, "  %-66s %9d %11.2f %6.1f%% %9s%n", r.getKey(), e.calls.sum(), ms,
                    100 * ms / Math.max(1e-9, total),
                    flops == 0 ? "" : String.format(Locale.ROOT, "%.1f", flops / (ms * 1e9))));
        }
        return sb.toString();
    }
}
