// The tracker's live and peak bytes per category and in total, the split of the total's peak
// by category, its double-free error, and resetPeak; the numbers the memory model (docs/ARCHITECTURE.md) is checked against.
package org.fsdp4j.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

class MemoryTrackerTest {

    @Test
    void liveAndPeakPerCategoryMatchARandomHistory() {
        long seed = System.nanoTime();
        Random r = new Random(seed);
        MemoryTracker t = new MemoryTracker("rank0");
        int cats = MemoryCategory.values().length;
        long[] live = new long[cats];
        long[] peak = new long[cats];
        long totalPeak = 0;
        long[] atPeak = new long[cats];
        for (int step = 0; step < 2000; step++) {
            MemoryCategory c = MemoryCategory.values()[r.nextInt(cats)];
            int i = c.ordinal();
            if (r.nextBoolean() || live[i] == 0) {
                long n = 1 + r.nextInt(1000);
                t.allocated(c, n);
                live[i] += n;
            } else {
                long n = 1 + (long) (r.nextDouble() * live[i]);
                n = Math.min(n, live[i]);
                t.freed(c, n);
                live[i] -= n;
            }
            peak[i] = Math.max(peak[i], live[i]);
            long total = java.util.Arrays.stream(live).sum();
            if (total > totalPeak) {
                totalPeak = total;
                atPeak = live.clone();
            }
        }
        for (MemoryCategory c : MemoryCategory.values()) {
            assertEquals(live[c.ordinal()], t.liveBytes(c), c + " live, seed " + seed);
            assertEquals(peak[c.ordinal()], t.peakBytes(c), c + " peak, seed " + seed);
            assertEquals(live[c.ordinal()], t.liveByCategory().get(c));
            assertEquals(peak[c.ordinal()], t.peakByCategory().get(c));
            assertEquals(atPeak[c.ordinal()], t.atPeakByCategory().get(c), c + " at the total's peak, seed " + seed);
        }
        assertEquals(java.util.Arrays.stream(live).sum(), t.liveBytes());
        assertEquals(totalPeak, t.peakBytes(), "seed " + seed);
        assertEquals(live[0] + live[1] + live[2], t.persistentBytes());
        t.resetPeak();
        assertEquals(t.liveBytes(), t.peakBytes());
    }

    @Test
    void freeingMoreThanIsLiveIsAnError() {
        MemoryTracker t = new MemoryTracker("rank1");
        t.allocated(MemoryCategory.GATHERED, 100);
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> t.freed(MemoryCategory.GATHERED, 101));
        assertTrue(e.getMessage().contains("rank1") && e.getMessage().contains("gathered"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> t.allocated(MemoryCategory.PARAMS, -1));
    }
}
