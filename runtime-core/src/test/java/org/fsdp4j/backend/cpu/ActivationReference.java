// The GELU (tanh approximation, with the fp32 constants the backends use) and the SiLU and their
// derivatives in fp64, right at every input: stable sigmoids, and the limits at ±∞ (GELU(−∞) = −0,
// GELU'(+∞) = SiLU'(+∞) = 1, SiLU(−∞) = −0) where the plain formulas give ∞·0. The edge inputs
// where fp32 formulas go wrong are listed once here for the CPU test and the CUDA emulator's cases.
package org.fsdp4j.backend.cpu;

public final class ActivationReference {

    /** √(2/π) and 0.044715 as the fp32 constants of Gelu and gelu.cu, exactly. */
    public static final double SCALE = (float) Math.sqrt(2.0 / Math.PI);
    public static final double CUBIC = 0.044715f;

    /**
     * Huge inputs, ±∞, NaN, ±0, the largest and smallest normals, and the inputs around the exp
     * clamp of [−87, 88] (SiLU's exponent is −g, GELU's reaches 88 near x = −10.06).
     */
    public static final float[] EDGES = {1e12f, -1e12f, 1e15f, -1e15f, 3e38f, -3e38f, Float.POSITIVE_INFINITY,
        Float.NEGATIVE_INFINITY, Float.NaN, 0f, -0f, Float.MAX_VALUE, -Float.MAX_VALUE, Float.MIN_NORMAL,
        -Float.MIN_NORMAL, 87f, -87f, 88f, -88f, 89f, -89f, -10f, -10.5f, -11f, -12.5f, 10.5f, -80f, -100f,
        -150f, -152f, 1e20f, -1e20f};

    private ActivationReference() {
    }

    /** 1 / (1 + e^−t) without overflow. */
    static double sigmoid(double t) {
        if (t >= 0) {
            return 1 / (1 + Math.exp(-t));
        }
        double e = Math.exp(t);
        return e / (1 + e);
    }

    private static double u(double x) {
        return SCALE * (x + CUBIC * x * x * x);
    }

    /** x·σ(2u), the same as ½x(1 + tanh u). */
    public static double gelu(double x) {
        if (Double.isInfinite(x)) {
            return x > 0 ? x : -0.0;
        }
        return x * sigmoid(2 * u(x));
    }

    /** σ(2u)·(1 + 2x·u'·σ(−2u)). */
    public static double geluGrad(double x) {
        if (Double.isInfinite(x)) {
            return x > 0 ? 1 : -0.0;
        }
        double du = SCALE * (1 + 3 * CUBIC * x * x);
        return sigmoid(2 * u(x)) * (1 + 2 * x * du * sigmoid(-2 * u(x)));
    }

    /** g·σ(g). */
    public static double silu(double g) {
        if (Double.isInfinite(g)) {
            return g > 0 ? g : -0.0;
        }
        return g * sigmoid(g);
    }

    /** σ(g)·(1 + g·σ(−g)). */
    public static double siluGrad(double g) {
        if (Double.isInfinite(g)) {
            return g > 0 ? 1 : -0.0;
        }
        return sigmoid(g) * (1 + g * sigmoid(-g));
    }
}
