// The JDK's Vector API (jdk.incubator.vector) for the CPU backend's element-wise loops: the
// species, a vector exp with FloatExp's exact arithmetic, and fp64 accumulation of fp32 data.
//
// Bits: every vector loop here does per lane exactly what the scalar code of the same op does
// (the same operations in the same order, no fused multiply-add, which Java never contracts
// either), and the loop tails run that scalar code, so a lane-wise op gives the same bits whatever
// the vector width. Sums keep DL partial sums (one per double lane), added in lane order from an
// array, never with reduceLanes (whose order is unspecified and may differ between the intrinsic
// and the interpreter): deterministic on a machine for any thread count and across JIT tiers; a
// machine with other vector widths may differ in the last bits of a row statistic. A max is exact
// in any order, so maxLanes does use reduceLanes.
//
// One species per element type, always: F for fp32, D for fp64 (and the ints F reinterprets to).
// The JDK's vector methods (fromArray, intoArray, ...) are shared by every species of a type, and
// C2 inlines them with their type profiles: once a second fp32 shape (a half-width species, as
// widening to fp64 once used) had passed through them, a kernel compiled later could see two
// receiver classes there, fail to intrinsify, and run boxed (an allocation per vector op; AdamW
// 2.7x and the GELU backward 1.6x slower, in about half of the runs, depending on what C2 had
// profiled when it compiled them). So widening loads F vectors and converts
// one half of them, and narrowing blends into an F vector.
//
// The module must be resolved at launch (`--add-modules jdk.incubator.vector`); the CPU backend
// checks that first (VectorModule.require, a class that does not touch the API) so that a JVM
// without it gets one clear sentence instead of a NoClassDefFoundError from this class's initialiser.
package org.fsdp4j.backend.cpu;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

final class Simd {

    /** fp32 lanes of the machine's widest vector (16 with AVX-512, 8 with AVX2). */
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int FL = F.length();
    /** fp64 lanes for accumulating fp32 data in fp64: as wide as F, so an F vector is two D vectors. */
    static final VectorSpecies<Double> D = DoubleVector.SPECIES_PREFERRED;
    static final int DL = D.length();
    /** The lanes of an F vector that one D vector narrows into (the first DL), and the others. */
    private static final VectorMask<Float> LOW = VectorMask.fromLong(F, (1L << DL) - 1);
    private static final VectorMask<Float> HIGH = LOW.not();

    static {
        if (FL != 2 * DL) {
            throw new IllegalStateException("the preferred fp32 species has " + FL + " lanes and the fp64 one "
                    + DL + ": the CPU backend needs the same vector width for both");
        }
    }

    private Simd() {
    }

    /**
     * x[from..to) = FloatExp.exp(x) in place: lane by lane the same operations in the same order
     * (the same bits). The vector exp is written out inside this loop on purpose: as a method of
     * its own it is compiled alone while hot, and C2 then does not inline a large compiled method
     * into the loops that call it, which boxes every vector (an allocation per op).
     */
    @CompiledAlone
    static void expInPlace(float[] x, int from, int to) {
        int i = from;
        for (; i <= to - FL; i += FL) {
            FloatVector v = FloatVector.fromArray(F, x, i).max(FloatExp.MIN_ARG).min(FloatExp.MAX_ARG);  // NaN stays NaN
            FloatVector shifted = v.mul(FloatExp.LOG2E).add(FloatExp.ROUNDER);
            FloatVector n = shifted.sub(FloatExp.ROUNDER);
            FloatVector twoToN = shifted.reinterpretAsInts().lanewise(VectorOperators.LSHL, 23).add(127 << 23)
                    .reinterpretAsFloats();
            FloatVector r = v.sub(n.mul(FloatExp.LN2_HI)).sub(n.mul(FloatExp.LN2_LO));
            FloatVector p = r.mul(FloatExp.P0).add(FloatExp.P1);
            p = p.mul(r).add(FloatExp.P2);
            p = p.mul(r).add(FloatExp.P3);
            p = p.mul(r).add(FloatExp.P4);
            p = p.mul(r).add(FloatExp.P5);
            p.mul(r.mul(r)).add(r).add(1f).mul(twoToN).intoArray(x, i);
        }
        for (; i < to; i++) {
            x[i] = FloatExp.exp(x[i]);
        }
    }

    /** Half {@code part} (0: lanes 0..DL−1, 1: the rest) of an F vector, widened to fp64 (exact). */
    static DoubleVector widen(FloatVector v, int part) {
        return (DoubleVector) v.convertShape(VectorOperators.F2D, D, part);
    }

    /**
     * a[i .. i+DL) widened, for loops that step FL at a time and take each step's upper half with a
     * load of its own at i + DL (a shuffle-free widen: the upper half of one F vector costs C2 a
     * rearrange, and the nodes of those pushed larger kernels past what it intrinsifies). It reads
     * a[i .. i+FL): the caller's bound (wideEnd) keeps that inside the array.
     */
    static DoubleVector widenAt(float[] a, int i) {
        return widen(FloatVector.fromArray(F, a, i), 0);
    }

    /**
     * Where a loop over [0, vecEnd) of arrays with at least {@code room} elements from its start
     * stops stepping FL at a time with widenAt at j and j + DL: min(vecEnd, room − DL).
     */
    static int wideEnd(int vecEnd, int room) {
        return Math.min(vecEnd, room - DL);
    }

    /** DL fp32 elements of a from index i, widened to fp64 (exact); any i (a copy near the array's end). */
    static DoubleVector widen(float[] a, int i) {
        if (i + FL <= a.length) {
            return widen(FloatVector.fromArray(F, a, i), 0);     // the F vector's upper half is not used
        }
        return widenAtEnd(a, i);
    }

    /** widen for the last DL elements of an array with no FL elements from i: through a padded copy. */
    private static DoubleVector widenAtEnd(float[] a, int i) {
        float[] pad = PAD.get();
        System.arraycopy(a, i, pad, 0, DL);
        return widen(FloatVector.fromArray(F, pad, 0), 0);
    }

    /** lo and hi rounded to fp32 (RNE, as a cast) into one F vector: lo in lanes 0..DL−1, hi in the rest. */
    static FloatVector narrow(DoubleVector lo, DoubleVector hi) {
        FloatVector l = (FloatVector) lo.convertShape(VectorOperators.D2F, F, 0);
        FloatVector h = (FloatVector) hi.convertShape(VectorOperators.D2F, F, -1);
        return l.blend(h, HIGH);
    }

    /** a[i .. i+DL) = v rounded to fp32 (RNE, as a cast); a's other elements are left as they are. */
    static void narrowInto(DoubleVector v, float[] a, int i) {
        FloatVector r = (FloatVector) v.convertShape(VectorOperators.D2F, F, 0);
        if (i + FL <= a.length) {
            FloatVector.fromArray(F, a, i).blend(r, LOW).intoArray(a, i);
        } else {
            float[] pad = PAD.get();
            r.intoArray(pad, 0);
            System.arraycopy(pad, 0, a, i, DL);
        }
    }

    /** The lanes of {@code acc} added in lane order (scratch holds DL doubles). */
    static double sumLanes(DoubleVector acc, double[] scratch) {
        acc.intoArray(scratch, 0);
        double s = 0;
        for (int l = 0; l < DL; l++) {
            s += scratch[l];
        }
        return s;
    }

    /**
     * The largest lane (Math.max's semantics). A max is exact in any order (NaN wins, +0 over −0,
     * whatever the pairing), so the unspecified order of reduceLanes cannot change it; its
     * intrinsic is one instruction sequence where a store and a scalar loop cost ~90 ns a row.
     */
    static float maxLanes(FloatVector v) {
        return v.reduceLanes(VectorOperators.MAX);
    }

    /** Σ x[0..n) in fp64: DL lane partials added in lane order, then the tail in order. */
    static double sum(float[] x, int n, double[] scratch) {
        return sum(x, 0, n, scratch);
    }

    /** Σ x[from..from+n) in fp64, as sum(x, n, scratch) on the elements from {@code from}. */
    @CompiledAlone
    static double sum(float[] x, int from, int n, double[] scratch) {
        DoubleVector acc = DoubleVector.zero(D);
        int vecEnd = n - n % DL;
        int wide = wideEnd(vecEnd, x.length - from);
        int j = 0;
        for (; j + FL <= wide; j += FL) {        // lane l takes x[j + l], then x[j + DL + l]: as DL steps
            acc = acc.add(widenAt(x, from + j)).add(widenAt(x, from + j + DL));
        }
        for (; j < vecEnd; j += DL) {
            acc = acc.add(widen(x, from + j));
        }
        double s = sumLanes(acc, scratch);
        for (; j < n; j++) {
            s += x[from + j];
        }
        return s;
    }

    /** Σ x[0..n)² in fp64 (each square exact): DL lane partials added in lane order, then the tail in order. */
    @CompiledAlone
    static double sumOfSquares(float[] x, int n, double[] scratch) {
        DoubleVector acc = DoubleVector.zero(D);
        int vecEnd = n - n % DL;
        int wide = wideEnd(vecEnd, x.length);
        int j = 0;
        for (; j + FL <= wide; j += FL) {
            DoubleVector lo = widenAt(x, j);
            DoubleVector hi = widenAt(x, j + DL);
            acc = acc.add(lo.mul(lo)).add(hi.mul(hi));
        }
        for (; j < vecEnd; j += DL) {
            DoubleVector v = widen(x, j);
            acc = acc.add(v.mul(v));
        }
        double s = sumLanes(acc, scratch);
        for (; j < n; j++) {
            s += (double) x[j] * x[j];
        }
        return s;
    }

    /** acc[0..n) += x[0..n) widened to fp64 (lane-wise: the scalar loop's bits). */
    @CompiledAlone
    static void addInto(double[] acc, float[] x, int n) {
        int vecEnd = n - n % DL;
        int j = 0;
        for (; j < vecEnd; j += DL) {            // one D vector of acc per step: no F-wide step to gain
            DoubleVector.fromArray(D, acc, j).add(widen(x, j)).intoArray(acc, j);
        }
        for (; j < n; j++) {
            acc[j] += x[j];
        }
    }

    /** A double[] of DL elements for sumLanes, private to this thread. */
    /** a[aOff + j] += b[bOff + j] for j in [0, n), each sum rounded in fp32. */
    @CompiledAlone
    static void addAt(float[] a, int aOff, float[] b, int bOff, int n) {
        int j = 0;
        for (; j <= n - FL; j += FL) {
            FloatVector.fromArray(F, a, aOff + j).add(FloatVector.fromArray(F, b, bOff + j)).intoArray(a, aOff + j);
        }
        for (; j < n; j++) {
            a[aOff + j] += b[bOff + j];
        }
    }

    static double[] laneScratch() {
        return LANES.get();
    }

    private static final ThreadLocal<double[]> LANES = ThreadLocal.withInitial(() -> new double[DL]);
    private static final ThreadLocal<float[]> PAD = ThreadLocal.withInitial(() -> new float[FL]);
}
