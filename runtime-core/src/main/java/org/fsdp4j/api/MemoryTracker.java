// Every byte the runtime allocates on a device goes through one of these (one per rank and
// device), labelled by category, so live and peak numbers are measured rather than estimated.
package org.fsdp4j.api;

import java.util.EnumMap;
import java.util.Map;

/**
 * Counts the bytes allocated on one device for one rank, by {@link MemoryCategory}: live now,
 * the peak of each category, and the peak of the total with what each category held at that
 * instant. A backend reports every allocation and free of its storage here, so the counts are
 * the bytes of the storage live tensors hold (memory a caching allocator keeps pooled after a
 * free is not counted).
 * {@link ShardedModel#deviceMemory()} and {@link ShardedModel#hostMemory()} hand them out.
 *
 * <p>Every method is synchronized: ranks' threads and streams update a tracker while any thread
 * reads it. Readers get a consistent value per call, not across calls.
 */
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
     * Starts recording the live bytes per category at every allocation and free, for a chart of
     * memory over a step; the first entry is the state now. Replaces a recording in progress.
     *
     * @param maxEvents the most entries kept; later changes are not recorded (0 records nothing)
     */
    public synchronized void startTimeline(int maxEvents) {
        timeline = new java.util.ArrayList<>();
        timelineLimit = maxEvents;
        record();
    }

    /**
     * Stops recording and returns what was recorded.
     *
     * @return one entry per change, in order, each {@code [System.nanoTime(), live bytes of each
     *         MemoryCategory in ordinal order]}; empty if no recording was running
     */
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

    /**
     * A tracker with nothing allocated.
     *
     * @param name names the rank and device in reports and errors ("rank 0", "rank 0 host")
     */
    public MemoryTracker(String name) {
        this.name = name;
    }

    /**
     * The name given at construction.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * Counts an allocation (called by a backend's storage when it allocates, not by models).
     *
     * @param category what the bytes hold
     * @param numBytes bytes allocated, 0 or more
     * @throws IllegalArgumentException if {@code numBytes} is negative
     */
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

    /**
     * Counts a free (called by a backend's storage when it is closed, not by models).
     *
     * @param category what the bytes held, as given to {@link #allocated}
     * @param numBytes bytes freed
     * @throws IllegalStateException if more bytes of {@code category} would be freed than are
     *                               live (a double free), or {@code numBytes} is negative
     */
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

    /**
     * Bytes allocated and not yet freed, over all categories.
     *
     * @return live bytes now
     */
    public synchronized long liveBytes() {
        return totalLiveBytes;
    }

    /**
     * The most bytes live at once, over all categories, since construction or the last
     * {@link #resetPeak()}.
     *
     * @return the peak of the total, in bytes
     */
    public synchronized long peakBytes() {
        return totalPeakBytes;
    }

    /**
     * Bytes of one category allocated and not yet freed.
     *
     * @param category the category
     * @return its live bytes now
     */
    public synchronized long liveBytes(MemoryCategory category) {
        return liveBytes[category.ordinal()];
    }

    /**
     * The most bytes this category alone held at once, since construction or the last
     * {@link #resetPeak()}. The categories' peaks may fall at different instants, so they can sum
     * to more than {@link #peakBytes()}.
     *
     * @param category the category
     * @return its peak, in bytes
     */
    public synchronized long peakBytes(MemoryCategory category) {
        return peakBytes[category.ordinal()];
    }

    /**
     * The persistent state live now, in the sense of docs/ARCHITECTURE.md ("Memory per rank"):
     * what a rank keeps between steps.
     *
     * @return live bytes of {@link MemoryCategory#PARAMS}, {@link MemoryCategory#GRADS} and
     *         {@link MemoryCategory#OPTIMIZER} together
     */
    public synchronized long persistentBytes() {
        return liveBytes[MemoryCategory.PARAMS.ordinal()] + liveBytes[MemoryCategory.GRADS.ordinal()]
                + liveBytes[MemoryCategory.OPTIMIZER.ordinal()];
    }

    /**
     * Starts a new peak window: every peak becomes the current live bytes (e.g. after warm-up,
     * to measure the steady state).
     */
    public synchronized void resetPeak() {
        totalPeakBytes = totalLiveBytes;
        System.arraycopy(liveBytes, 0, peakBytes, 0, liveBytes.length);
        System.arraycopy(liveBytes, 0, atTotalPeak, 0, liveBytes.length);
    }

    /**
     * Live bytes of every category now.
     *
     * @return a new map holding every category, in ordinal order
     */
    public synchronized Map<MemoryCategory, Long> liveByCategory() {
        Map<MemoryCategory, Long> m = new EnumMap<>(MemoryCategory.class);
        for (MemoryCategory c : MemoryCategory.values()) {
            m.put(c, liveBytes[c.ordinal()]);
        }
        return m;
    }

    /**
     * Each category's own peak, as {@link #peakBytes(MemoryCategory)} gives it.
     *
     * @return a new map holding every category, in ordinal order
     */
    public synchronized Map<MemoryCategory, Long> peakByCategory() {
        Map<MemoryCategory, Long> m = new EnumMap<>(MemoryCategory.class);
        for (MemoryCategory c : MemoryCategory.values()) {
            m.put(c, peakBytes[c.ordinal()]);
        }
        return m;
    }

    /**
     * What each category held at the instant the total peaked: the breakdown of
     * {@link #peakBytes()}, to which it sums.
     *
     * @return a new map holding every category, in ordinal order
     */
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
