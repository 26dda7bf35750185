// ParamInit is a pure function of (seed, name, element): any slice equals the same range of the
// whole parameter (what FSDP shards rely on), other names and seeds give other values, and the
// normals have the spec's mean and std.
package org.fsdp4j.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class ParamInitTest {

    @Test
    void slicesEqualTheWholeParameter() {
        long seed = System.nanoTime();
        ParamSpec spec = ParamSpec.normal("h.3.attn.qkv.weight", 0.02, true, 37, 11);
        float[] whole = new float[(int) spec.numel()];
        ParamInit.fill(spec, seed, whole);
        Random r = new Random(seed);
        for (int trial = 0; trial < 50; trial++) {
            int first = r.nextInt(whole.length);
            int count = r.nextInt(whole.length - first + 1);
            float[] slice = new float[count + 3];
            ParamInit.fill(spec, seed, first, slice, 3, count);
            assertArrayEquals(Arrays.copyOfRange(whole, first, first + count), Arrays.copyOfRange(slice, 3, count + 3),
                    "slice [" + first + ", " + (first + count) + ") of seed " + seed);
        }
    }

    @Test
    void valuesDependOnSeedAndNameOnly() {
        long seed = System.nanoTime();
        ParamSpec a = ParamSpec.normal("wte", 0.02, true, 64, 8);
        ParamSpec sameNameOtherShape = ParamSpec.normal("wte", 0.02, true, 512);
        float[] x = new float[512];
        float[] y = new float[512];
        ParamInit.fill(a, seed, x);
        ParamInit.fill(sameNameOtherShape, seed, y);
        assertArrayEquals(x, y, "the flat values depend on the name, not the shape");
        ParamInit.fill(ParamSpec.normal("wpe", 0.02, true, 512), seed, y);
        assertFalse(Arrays.equals(x, y), "two names must give two streams");
        ParamInit.fill(a, seed + 1, y);
        assertFalse(Arrays.equals(x, y), "two seeds must give two streams");
    }

    @Test
    void normalsHaveTheRequestedMeanAndStd() {
        int n = 200_000;
        double std = 0.02;
        float[] x = new float[n];
        ParamInit.fill(ParamSpec.normal("h.0.mlp.fc.weight", std, true, n), System.nanoTime(), x);
        double sum = 0, sumSq = 0;
        for (float v : x) {
            sum += v;
            sumSq += (double) v * v;
        }
        double mean = sum / n;
        double sampleStd = Math.sqrt(sumSq / n - mean * mean);
        // standard errors: mean std/√n ≈ 4.5e-5, std std/√(2n) ≈ 3.2e-5; allow 5 of each
        assertEquals(0, mean, 5 * std / Math.sqrt(n), "mean");
        assertEquals(std, sampleStd, 5 * std / Math.sqrt(2.0 * n), "std");
    }

    @Test
    void constantInitsAndBadRanges() {
        float[] x = new float[6];
        ParamInit.fill(ParamSpec.ones("lnf.weight", 6), 1, x);
        assertArrayEquals(new float[] {1, 1, 1, 1, 1, 1}, x);
        ParamInit.fill(ParamSpec.zeros("lnf.bias", 6), 1, x);
        assertArrayEquals(new float[6], x);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ParamInit.fill(ParamSpec.zeros("lnf.bias", 6), 1, 4, x, 0, 3));
        assertEquals(true, e.getMessage().contains("lnf.bias"), e.getMessage());
    }
}
