// The Sampler: greedy is the argmax (the lowest id among equals) at any seed; top-k = 1 is greedy at
// any temperature; the same seed gives the same draws and another seed others; top-k never draws
// outside the k largest logits; the draws follow softmax(logits / T) (a chi-square test at a fixed
// seed); and a negative temperature or top-k is refused.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

class SamplerTest {

    private static final float[] LOGITS = {0.5f, 2f, -1f, 2f, 1.5f, 0f};   // ids 1 and 3 tie for the largest

    @Test
    void greedyIsTheArgmaxLowestIdAmongEquals() {
        for (long seed : new long[] {1, 2, 3}) {
            assertEquals(1, new Sampler(0, 0, seed).next(LOGITS, 0, 6));
            assertEquals(1, new Sampler(0.8, 1, seed).next(LOGITS, 0, 6), "top-k 1 is greedy");
        }
        float[] padded = new float[9];
        System.arraycopy(LOGITS, 0, padded, 3, 6);
        padded[0] = 100;                                   // outside the row: not read
        assertEquals(1, new Sampler(0, 0, 5).next(padded, 3, 6));
    }

    @Test
    void theSameSeedGivesTheSameDrawsAndAnotherOthers() {
        int[] a = draws(new Sampler(1.0, 0, 42), 50);
        int[] b = draws(new Sampler(1.0, 0, 42), 50);
        int[] c = draws(new Sampler(1.0, 0, 43), 50);
        assertArrayEquals(a, b);
        assertFalse(Arrays.equals(a, c), "seeds 42 and 43 drew the same 50 tokens");
    }

    @Test
    void topKDrawsOnlyAmongTheKLargest() {
        int[] d = draws(new Sampler(5.0, 3, 7), 2000);     // a high temperature would reach every id
        boolean[] seen = new boolean[6];
        for (int t : d) {
            seen[t] = true;
        }
        assertTrue(seen[1] && seen[3] && seen[4], Arrays.toString(seen));
        assertFalse(seen[0] || seen[2] || seen[5], "drew outside the top 3: " + Arrays.toString(seen));
    }

    @Test
    void drawsFollowTheTemperedSoftmax() {
        double temperature = 0.7;
        int n = 20_000;
        int[] counts = new int[6];
        for (int t : draws(new Sampler(temperature, 0, 2024), n)) {
            counts[t]++;
        }
        double[] p = new double[6];
        double sum = 0;
        for (int i = 0; i < 6; i++) {
            p[i] = Math.exp(LOGITS[i] / temperature);
            sum += p[i];
        }
        double chi2 = 0;
        for (int i = 0; i < 6; i++) {
            double expected = n * p[i] / sum;
            chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
        }
        // 5 degrees of freedom: P(χ² > 20.5) = 0.001; a wrong temperature (1.0) gives χ² in the hundreds
        assertTrue(chi2 < 20.5, "χ² " + chi2 + " for counts " + Arrays.toString(counts));
    }

    @Test
    void badSettingsAreRefused() {
        IllegalArgumentException k = assertThrows(IllegalArgumentException.class, () -> new Sampler(1, -1, 0));
        assertEquals("--top-k must be 0 (every token) or a positive number of tokens, got -1", k.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new Sampler(-0.5, 0, 0));
        assertThrows(IllegalArgumentException.class, () -> new Sampler(Double.NaN, 0, 0));
        assertThrows(IllegalArgumentException.class, () -> new Sampler(Double.POSITIVE_INFINITY, 0, 0));
    }

    private static int[] draws(Sampler s, int n) {
        int[] d = new int[n];
        for (int i = 0; i < n; i++) {
            d[i] = s.next(LOGITS, 0, LOGITS.length);
        }
        return d;
    }
}
