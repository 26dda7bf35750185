// Every byte the runtime allocates on a device goes through one of these (one per rank and
// device), labelled by category, so live and peak numbers are measured rather than estimated.
package org.fsdp4j.api;

import java.util.EnumMap;
import java.util.Map;

public final class MemoryTracker {

    private final String name;
    private final long[] liveBytes = new long[MemoryCategory.values().length];
    private final long[] peakBytes = new long[MemoryCategory.values().length];
    private final long[] atTotalPeak = new long[MemoryCategory.values().length];   // live per category when the total peaked
    private long totalLiveBytes;
    private long totalPeakBytes;
    private java.util.List<long[]> timeline;          // while recording: [nanoTime, live per category...] per change
    private int timelineLimit;

    /**
     * Starts recording the live bytes per category at every allocation and free (at most
     * {@code maxEvents} of them), for a chart of memory over a step.
     */
    public synchronized void startTimeline(int maxEvents) {
        timeline = new java.util.ArrayList<>();
        timelineLimit = maxEvents;
        record();
    }

    /** Stops recording; each entry is [System.nanoTime(), live bytes of each MemoryCategory in ordinal order]. */
    public synchronized java.util.List<long[]> stopTimeline() {
        java.util.List<long[]> t = timeline == null ? java.util.List.of() : java.util.List.copyOf(timeline);
        timeline = null;
        return t;
    }

    private void record() {
        if (timeline != null && timeline.size() < timelineLimit) {
            long[] e = new long[1 + liveBytes.length];
            e[0] = System.nanoTime();
            System.arraycopy(liveBytes, 0, e, 1, liveBytes.length);
            timeline.add(e);
        }
    }

    public MemoryTracker(String name) {
        this.name = name;
    }

    public String name() {
        return name;
    }

    public synchronized void allocated(MemoryCategory category, long numBytes) {
        if (numBytes < 0) {
            throw new IllegalArgumentException("negative allocation: " + numBytes);
        }
        int c = category.ordinal();
        liveBytes[c] += numBytes;
        peakBytes[c] = Math.max(peakBytes[c], liveBytes[c]);
        totalLiveBytes += numBytes;
        if (totalLiveBytes > totalPeakBytes) {
            totalPeakBytes = totalLiveBytes;
            System.arraycopy(liveBytes, 0, atTotalPeak, 0, liveBytes.length);
        }
        record();
    }

    public synchronized void freed(MemoryCategory category, long numBytes) {
        int c = category.ordinal();
        if (numBytes < 0 || liveBytes[c] < numBytes) {
            throw new IllegalStateException(name + ": freeing " + numBytes + " bytes of " + category.label()
                    + " but only " + liveBytes[c] + " are live (double free?)");
        }
        liveBytes[c] -= numBytes;
        totalLiveBytes -= numBytes;
        record();
    }

    public synchronized long liveBytes() {
        return totalLiveBytes;
    }

    public synchronized long peakBytes() {
        return totalPeakBytes;
    }

    public synchronized long liveBytes(MemoryCategory category) {
        return liveBytes[category.ordinal()];
    }

    /** Highest live byte count this category alone ever reached. */
    public synchronized long peakBytes(MemoryCategory category) {
        return peakBytes[category.ordinal()];
    }

    /** Persistent state in the sense of docs/ARCHITECTURE.md ("Memory per rank"): params + grads + optimizer, live now. */
    public synchronized long persistentBytes() {
        return liveBytes[MemoryCategory.PARAMS.ordinal()] + liveBytes[MemoryCategory.GRADS.ordinal()]
                + liveBytes[MemoryCategory.OPTIMIZER.ordinal()];
    }

    /** Starts a new peak window at the current live bytes (e.g. after warm-up). */
    public synchronized void resetPeak() {
        totalPeakBytes = totalLiveBytes;
        System.arraycopy(liveBytes, 0, peakBytes, 0, liveBytes.length);
        System.arraycopy(liveBytes, 0, atTotalPeak, 0, liveBytes.length);
    }

    public synchronized Map<MemoryCategory, Long> liveByCategory() {
        Map<MemoryCategory, Long> m = new EnumMap<>(MemoryCategory.class);
        for (MemoryCategory c : MemoryCategory.values()) {
            m.put(c, liveBytes[c.ordinal()]);
        }
        return m;
    }

    public synchronized Map<MemoryCategory, Long> peakByCategory() {
        Map<MemoryCategory, Long> m = new EnumMap<>(MemoryCategory.class);
        for (MemoryCategory c : MemoryCategory.values()) {
            m.put(c, peakBytes[c.ordinal()]);
        }
        return m;
    }

    /** What was live per category at the instant the total peaked: it sums to peakBytes(). */
    public synchronized Map<MemoryCategory, Long> atPeakByCategory() {
        Map<MemoryCategory, Long> m = new EnumMap<>(MemoryCategory.class);
        for (MemoryCategory c : MemoryCategory.values()) {
            m.put(c, atTotalPeak[c.ordinal()]);
        }
        return m;
    }

    @Override
    public synchronized String toString() {
        return name + ": live " + totalLiveBytes + " B, peak " + totalPeakBytes + " B";
    }
}
