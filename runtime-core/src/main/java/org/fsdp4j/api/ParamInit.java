// Deterministic parameter initialisation: element i of a parameter is a pure function of
// (seed, parameter name, i, spec). Random bits come from a counter-based SplitMix64 (the
// generator behind java.util.SplittableRandom), so any slice of any parameter can be produced
// on any rank without generating what comes before it: every FSDP shard, at any world size,
// agrees bit for bit with the whole parameter (the tests' unsharded store). Normals are
// Box–Muller pairs in fp64, scaled by the std, rounded once to fp32. StrictMath (fdlibm) rather
// than Math, so the values are the same in every JVM on every machine, not only within one process.
package org.fsdp4j.api;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The values of {@link ParamSpec#init()}, seeded: what {@link ParamSource#seeded(long)} gives. Any
 * element range of a parameter is computed without the rest, and equals the same range of the
 * whole parameter bit for bit, on any machine.
 */
public final class ParamInit {

    private static final long GOLDEN_GAMMA = 0x9e3779b97f4a7c15L;
    private static final double TWO_PI = 2 * Math.PI;
    private static final double UNIT_53 = 0x1.0p-53;

    private ParamInit() {
    }

    /**
     * The whole parameter into out[0 .. spec.numel()).
     *
     * @param spec the parameter (its name, shape and initialiser)
     * @param seed the run's seed
     * @param out  at least spec.numel() floats, overwritten from index 0
     */
    public static void fill(ParamSpec spec, long seed, float[] out) {
        if (out.length < spec.numel()) {
            throw new IllegalArgumentException("buffer of " + out.length + " floats is too small for " + spec);
        }
        fill(spec, seed, 0, out, 0, Math.toIntExact(spec.numel()));
    }

    /**
     * Elements [firstElement, firstElement + count) of the parameter (flat, row-major) into
     * out[outOffset ..]: exactly the values {@link #fill(ParamSpec, long, float[])} puts there.
     *
     * @param spec         the parameter (its name, shape and initialiser)
     * @param seed         the run's seed
     * @param firstElement the first element wanted, from 0
     * @param out          where the values go
     * @param outOffset    the first index of {@code out} written
     * @param count        elements wanted, with firstElement + count at most spec.numel()
     */
    public static void fill(ParamSpec spec, long seed, long firstElement, float[] out, int outOffset, int count) {
        if (firstElement < 0 || count < 0 || firstElement + count > spec.numel()) {
            throw new IllegalArgumentException("elements [" + firstElement + ", " + (firstElement + count)
                    + ") are outside " + spec + " (" + spec.numel() + " elements)");
        }
        switch (spec.init()) {
            case ZEROS:
                Arrays.fill(out, outOffset, outOffset + count, 0f);
                return;
            case ONES:
                Arrays.fill(out, outOffset, outOffset + count, 1f);
                return;
            case NORMAL:
                fillNormal(streamKey(seed, spec.name()), spec.initStd(), firstElement, out, outOffset, count);
                return;
            default:
                throw new AssertionError(spec.init());
        }
    }

    /**
     * std · z for elements [first, first + count) of the standard-normal stream {@code key}, where
     * elements 2p and 2p + 1 are the cos and sin halves of Box–Muller pair p.
     */
    private static void fillNormal(long key, double std, long first, float[] out, int outOffset, int count) {
        long index = first;
        int j = 0;
        while (j < count) {
            long pair = index >>> 1;
            double u1 = ((bits(key, 2 * pair) >>> 11) + 1) * UNIT_53;   // (0, 1]: the log is finite
            double u2 = (bits(key, 2 * pair + 1) >>> 11) * UNIT_53;     // [0, 1)
            double r = Math.sqrt(-2 * StrictMath.log(u1));   // sqrt is exact IEEE everywhere
            double angle = TWO_PI * u2;
            if ((index & 1) == 0) {
                out[outOffset + j++] = (float) (std * r * StrictMath.cos(angle));
                index++;
                if (j == count) {
                    break;
                }
            }
            out[outOffset + j++] = (float) (std * r * StrictMath.sin(angle));
            index++;
        }
    }

    /** The key of one parameter's stream: the seed mixed with a 64-bit FNV-1a hash of the UTF-8 name. */
    static long streamKey(long seed, String name) {
        long h = 0xcbf29ce484222325L;
        for (byte c : name.getBytes(StandardCharsets.UTF_8)) {
            h ^= c & 0xff;
            h *= 0x100000001b3L;
        }
        return mix64(seed ^ mix64(h));
    }

    /** The counter-th output of SplitMix64 started at key. */
    private static long bits(long key, long counter) {
        return mix64(key + (counter + 1) * GOLDEN_GAMMA);
    }

    /** SplitMix64's finaliser (Stafford variant 13), as in java.util.SplittableRandom. */
    private static long mix64(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
