// Emulator cases for reductions.cu through ReductionLauncher: scale (fp16 overflow), the two-pass
// fp64 sums (Σx and Σx², one element, several blocks, and more elements than the launcher's
// 264 blocks × 256 threads cover, so the grid-stride loop wraps at its real grid; NaN and inf
// propagate), and the non-finite flag (NaN, ±inf in each dtype, at the first and last element).
package org.fsdp4j.cuda;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class ReductionCases {

    private ReductionCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(scale(r, DType.F32, 1000, 0.37f));
        out.add(scale(r, DType.BF16, 777, -3f));
        out.add(scale(r, DType.F16, 1000, 2f));
        out.add(scale(r, DType.F16, 1, 0.5f));
        out.add(sum(r, DType.F32, 1, false, null));
        out.add(sum(r, DType.F32, 1000, false, null));
        out.add(sum(r, DType.BF16, 1000, true, null));
        out.add(sum(r, DType.F32, 70_000, true, null));
        out.add(sum(r, DType.F16, 70_000, false, null));
        out.add(sum(r, DType.F16, 3000, true, Double.NEGATIVE_INFINITY));
        out.add(sum(r, DType.F32, 3000, false, Double.NaN));
        out.add(sumInto(r, DType.BF16, 1000, false, 0.25f));
        out.add(sumInto(r, DType.F32, 70_000, true, 1f / 3));
        out.add(sumInto(r, DType.F16, 1, false, 2f));
        out.add(nonFinite(r, DType.F32, 1000, -1, 0));
        out.add(nonFinite(r, DType.F32, 1000, 999, Double.NaN));
        out.add(nonFinite(r, DType.F16, 1000, 0, Double.POSITIVE_INFINITY));
        out.add(nonFinite(r, DType.BF16, 777, 400, Double.NEGATIVE_INFINITY));
        return out;
    }

    private static EmuCase scale(Random r, DType d, int n, float alpha) {
        EmuCase c = new EmuCase("scale_kernel", d + " n=" + n + " alpha=" + alpha);
        Tensor t = c.device.allocate(d, n);
        double[] x = c.device.put(t, EmuData.uniform(r, n, d == DType.F16 ? 4e4 : 10));
        new ReductionLauncher(c.device).scale(null, t, alpha);
        Approx[] ref = new Approx[n];
        for (int i = 0; i < n; i++) {
            ref[i] = Approx.exact(x[i]).times(alpha);
        }
        c.expect("t", t, ref);
        return c;
    }

    /**
     * result = Σ x (or Σ x²) over n elements, with {@code special} (if not null) as the middle one. fp64 throughout: per thread a grid-stride sequence, two warp butterflies
     * per block sum (10 additions), the final block the same over ≤ 2 partials per thread, so
     * every term passes at most ⌈n/(blocks·256)⌉ + 22 additions of unit roundoff 2^-53.
     */
    private static EmuCase sum(Random r, DType d, int n, boolean squared, Double special) {
        EmuCase c = new EmuCase(List.of("partial_sum_kernel", "final_sum_kernel"), (squared ? "squares " : "")
                + d + " n=" + n + (special == null ? "" : " with " + special));
        Tensor x = c.device.allocate(d, n);
        Tensor partials = c.device.allocate(DType.F32, 2L * ReductionLauncher.SUM_BLOCKS);
        Tensor result = c.device.allocate(DType.F32, 2);
        double[] v = EmuData.uniform(r, n, 3);
        if (special != null) {
            v[n / 2] = special;
        }
        double[] stored = c.device.put(x, v);
        new ReductionLauncher(c.device).sum(null, x, squared, partials, result);
        BigDecimal exact = BigDecimal.ZERO;
        double magnitude = 0;
        boolean finite = true;
        double nonFinite = 0;
        for (double s : stored) {
            double term = squared ? s * s : s;   // a float's square is exact in fp64
            if (!Double.isFinite(term)) {
                finite = false;
                nonFinite += term;
                continue;
            }
            exact = exact.add(new BigDecimal(term));
            magnitude += Math.abs(term);
        }
        long blocks = Math.max(1, Math.min(ReductionLauncher.SUM_BLOCKS, Grid.ceilDiv(n, Grid.THREADS)));
        long depth = Grid.ceilDiv(n, blocks * Grid.THREADS) + 22;
        double u64 = 0x1p-53;
        c.expectF64("result", result, finite ? exact.doubleValue() : nonFinite,
                depth * u64 / (1 - depth * u64) * magnitude * 1.0000001 + 0x1p-1074);
        return c;
    }

    /**
     * out[0] = fl32(out[0] + scale·Σ x (or Σ x²)): the same two passes, the last adding into the
     * device scalar (the step's loss and norm). Σ carries the fp64 bound of sum(); the add in fp64
     * and the one rounding to fp32 are one more rounding.
     */
    private static EmuCase sumInto(Random r, DType d, int n, boolean squared, float scale) {
        EmuCase c = new EmuCase(List.of("partial_sum_kernel", "final_sum_into_kernel"), "into, "
                + (squared ? "squares " : "") + d + " n=" + n + " scale=" + scale);
        Tensor x = c.device.allocate(d, n);
        Tensor partials = c.device.allocate(DType.F32, 2L * ReductionLauncher.SUM_BLOCKS);
        Tensor out = c.device.allocate(DType.F32, 1);
        double[] stored = c.device.put(x, EmuData.uniform(r, n, 3));
        double start = c.device.put(out, new double[] {r.nextGaussian()})[0];
        new ReductionLauncher(c.device).sumInto(null, x, squared, partials, scale, out);
        BigDecimal exact = BigDecimal.ZERO;
        double magnitude = 0;
        for (double v : stored) {
            double term = squared ? v * v : v;
            exact = exact.add(new BigDecimal(term));
            magnitude += Math.abs(term);
        }
        long blocks = Math.max(1, Math.min(ReductionLauncher.SUM_BLOCKS, Grid.ceilDiv(n, Grid.THREADS)));
        long depth = Grid.ceilDiv(n, blocks * Grid.THREADS) + 22;
        double u64 = 0x1p-53;
        double sumBound = depth * u64 / (1 - depth * u64) * magnitude * 1.0000001;
        Approx scaled = new Approx(scale * exact.doubleValue(), Math.abs(scale) * sumBound + 0x1p-60 * magnitude);
        c.expect("out", out, new Approx[] {Approx.exact(start).plus(scaled)});
        return c;
    }

    private static EmuCase nonFinite(Random r, DType d, int n, int at, double value) {
        EmuCase c = new EmuCase("nonfinite_kernel", d + " n=" + n + (at < 0 ? " all finite" : " " + value + " at " + at));
        Tensor x = c.device.allocate(d, n);
        Tensor flag = c.device.allocate(DType.I32, 1);
        double[] v = EmuData.uniform(r, n, 1e3);
        if (at >= 0) {
            v[at] = value;
        }
        c.device.put(x, v);
        c.device.putInts(flag, new int[] {0});
        new ReductionLauncher(c.device).nonFinite(null, x, flag);
        c.expectExact("flag", flag, new double[] {at < 0 ? 0 : 1});
        return c;
    }
}
