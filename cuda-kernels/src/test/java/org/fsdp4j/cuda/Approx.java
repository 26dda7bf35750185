// A quantity an fp32 kernel computes, for the emulator tests' references: v is its exact value
// (fp64, from exact inputs), e bounds how far the kernel's fp32 result can be from v. Each
// operation adds the standard model's rounding error, |fl(a op b) − (a op b)| ≤ u·|a op b| with
// u = 2^-24 (plus 2^-149 for underflow), to the errors its operands carry, so writing a
// reference in the kernel's own order of operations yields a bound that holds whatever order
// the hardware adds in (within the stated depth) and with or without FMA contraction (a fused
// multiply-add drops a rounding, never adds one). Library functions add their documented
// maximum error in ulps (CUDA Programming Guide, "Mathematical Functions": expf 2, logf 1;
// sqrtf and division are correctly rounded by default); one ulp is at most 2u·|x|. The fp64
// evaluation of v itself is covered by counting 2^-52 more per operation.
package org.fsdp4j.cuda;

import java.util.List;

record Approx(double v, double e) {

    /** fp32 unit roundoff. */
    static final double U = 0x1p-24;
    /** Absolute error of one rounding in fp32's subnormal range. */
    static final double TINY = 0x1p-149;
    /** Per operation: fp32's rounding of the kernel plus fp64's of the reference. */
    private static final double PER_OP = U + 0x1p-52;

    static Approx exact(double v) {
        return new Approx(v, 0);
    }

    /** γ_n = n·u / (1 − n·u): the relative error of n successive roundings. */
    static double gamma(long n) {
        return n * U / (1 - n * U);
    }

    /** A non-finite result must come out exactly (EmuCase checks it so), hence error 0. */
    private static Approx rounded(double v, double carried) {
        if (!Double.isFinite(v)) {
            return exact(v);
        }
        return new Approx(v, carried + PER_OP * (Math.abs(v) + carried) + TINY);
    }

    Approx plus(Approx b) {
        return rounded(v + b.v, e + b.e);
    }

    Approx minus(Approx b) {
        return rounded(v - b.v, e + b.e);
    }

    Approx times(Approx b) {
        return rounded(v * b.v, product(Math.abs(v), b.e) + product(Math.abs(b.v), e) + product(e, b.e));
    }

    /** x·y with 0·∞ = 0: an exact operand contributes no error, however large the other. */
    private static double product(double x, double y) {
        return x == 0 || y == 0 ? 0 : x * y;
    }

    Approx times(double b) {
        return times(exact(b));
    }

    /** a / b; a finite b's error must not reach zero. */
    Approx div(Approx b) {
        double margin = Math.abs(b.v) - b.e;
        if (Double.isFinite(b.v) && !(margin > 0)) {
            throw new IllegalArgumentException("division by " + b + ", whose error reaches zero");
        }
        double q = v / b.v;
        return rounded(q, (e + Math.abs(q) * b.e) / margin);
    }

    /** sqrtf, correctly rounded. */
    Approx sqrt() {
        double r = Math.sqrt(v);
        return rounded(r, e == 0 ? 0 : e / (Math.sqrt(Math.max(v - e, 0)) + r));
    }

    /** A library function with a maximum error of {@code ulps}, applied to the computed value. */
    private static Approx libm(double r, double carried, int ulps) {
        if (!Double.isFinite(r)) {
            return exact(r);
        }
        return new Approx(r, carried + (ulps * 2 * U + 0x1p-52) * (Math.abs(r) + carried) + TINY);
    }

    /** expf (2 ulp). */
    Approx exp() {
        double r = Math.exp(v);
        return libm(r, r * Math.expm1(e), 2);
    }

    /** logf (1 ulp); a finite argument's error must stay below its value. */
    Approx log() {
        if (Double.isFinite(v) && !(v > e)) {
            throw new IllegalArgumentException("log of " + this + ", whose error reaches zero");
        }
        return libm(Math.log(v), -Math.log1p(-e / v), 1);
    }

    /** x clamped to [lo, hi] by compares: exact where the computed value surely lies past a bound. */
    Approx clamp(double lo, double hi) {
        if (v - e >= hi) {
            return exact(hi);
        }
        if (v + e <= lo) {
            return exact(lo);
        }
        return new Approx(Math.min(hi, Math.max(lo, v)), e);
    }

    /** fmaxf, and any selection among computed values: exact, so the larger error carries. */
    static Approx max(Approx a, Approx b) {
        return new Approx(Math.max(a.v, b.v), Math.max(a.e, b.e));
    }

    /**
     * Σ terms in fp32 where each term passes through at most {@code depth} additions (a sequential
     * sum of n terms has depth n − 1; a warp butterfly adds 5): |error| ≤ Σe + γ_depth·Σ(|v| + e).
     */
    static Approx sum(List<Approx> terms, long depth) {
        double s = 0;
        double carried = 0;
        double magnitude = 0;
        for (Approx t : terms) {
            s += t.v;
            carried += t.e;
            magnitude += Math.abs(t.v) + t.e;
        }
        return new Approx(s, carried + (gamma(depth) + terms.size() * 0x1p-52) * magnitude + depth * TINY);
    }
}
