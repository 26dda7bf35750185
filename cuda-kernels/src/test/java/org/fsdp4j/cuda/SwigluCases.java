// Emulator cases for swiglu.cu through SwigluLauncher. The reference is the CPU twin's formula
// (ElementwiseOps: g / (1 + e^clamp(−g, −87, 88)) · u and its derivative) in fp64, with the error
// bound of the kernel's own fp32 operation order (Approx). Edges: ±0, gates where σ saturates
// (±20) and where the exponent is clamped (±90: σ(−90) is subnormal in fp32), NaN, values fp16
// cannot hold (7e4 becomes inf), and ±inf in the forward (the backward's derivative is ∞·0 there);
// out aliasing the gate; every dtype mix of the forward.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.BackendConformanceTest.FLOATS;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class SwigluCases {

    private static final double[] EDGES = {0.0, -0.0, 20, -20, 90, -90, 7e4, Double.NaN};
    private static final double[] INFINITE = {Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY};

    private SwigluCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        for (DType in : FLOATS) {
            for (DType o : FLOATS) {
                out.add(forward(r, in, o, 1000, false));
            }
        }
        out.add(forward(r, DType.BF16, DType.BF16, 333, true));
        out.add(forward(r, DType.F32, DType.F32, 1, false));
        DType[][] backward = {{DType.F32, DType.F32, DType.F32}, {DType.BF16, DType.BF16, DType.BF16},
            {DType.F16, DType.F16, DType.F16}, {DType.BF16, DType.F32, DType.F32}, {DType.F16, DType.BF16, DType.F32}};
        for (DType[] d : backward) {
            out.add(backward(r, d[0], d[1], d[2], 777));
        }
        return out;
    }

    private static EmuCase forward(Random r, DType inDt, DType outDt, int n, boolean aliasGate) {
        EmuCase c = new EmuCase("swiglu_forward_kernel", inDt + "->" + (aliasGate ? "gate, in place" : outDt.toString())
                + " n=" + n);
        Tensor gate = c.device.allocate(inDt, n);
        Tensor up = c.device.allocate(inDt, n);
        Tensor out = aliasGate ? gate : c.device.allocate(outDt, n);
        double[] edges = concat(EDGES, INFINITE);
        double[] g = c.device.put(gate, n < 2 * edges.length ? EmuData.uniform(r, n, 8)
                : EmuData.withEdges(EmuData.uniform(r, n, 8), edges));
        double[] u = c.device.put(up, EmuData.uniform(r, n, 3));
        new SwigluLauncher(c.device).forward(null, gate, up, out);
        Approx[] ref = new Approx[n];
        for (int i = 0; i < n; i++) {
            ref[i] = forward(Approx.exact(g[i]), u[i]);
        }
        c.expect("out", out, ref);
        return c;
    }

    private static EmuCase backward(Random r, DType inDt, DType doutDt, DType gradDt, int n) {
        EmuCase c = new EmuCase("swiglu_backward_kernel", inDt + "," + doutDt + "->" + gradDt + " n=" + n);
        Tensor gate = c.device.allocate(inDt, n);
        Tensor up = c.device.allocate(inDt, n);
        Tensor dout = c.device.allocate(doutDt, n);
        Tensor dgate = c.device.allocate(gradDt, n);
        Tensor dup = c.device.allocate(gradDt, n);
        double[] g = c.device.put(gate, EmuData.withEdges(EmuData.uniform(r, n, 8), EDGES));
        double[] u = c.device.put(up, EmuData.uniform(r, n, 3));
        double[] d = c.device.put(dout, EmuData.uniform(r, n, 2));
        double[] dg0 = c.device.put(dgate, EmuData.uniform(r, n, 1));
        double[] du0 = c.device.put(dup, EmuData.uniform(r, n, 1));
        new SwigluLauncher(c.device).backward(null, gate, up, dout, dgate, dup);
        Approx[] refGate = new Approx[n];
        Approx[] refUp = new Approx[n];
        Approx one = Approx.exact(1);
        for (int i = 0; i < n; i++) {
            Approx gi = Approx.exact(g[i]);
            Approx s = one.div(one.plus(clampedExp(gi)));
            Approx silu = gi.times(s);
            Approx du = Approx.exact(d[i]).times(u[i]);
            refGate[i] = Approx.exact(dg0[i]).plus(du.times(s.times(one.plus(gi.times(one.minus(s))))));
            refUp[i] = Approx.exact(du0[i]).plus(Approx.exact(d[i]).times(silu));
        }
        c.expect("dgate", dgate, refGate);
        c.expect("dup", dup, refUp);
        return c;
    }

    /** e^(−g) with the exponent clamped to [−87, 88], as exp_clamped. */
    private static Approx clampedExp(Approx g) {
        return g.times(-1).clamp(-87, 88).exp();
    }

    /** (g / (1 + e^(−g))) · u, in swiglu.cu's order. */
    private static Approx forward(Approx g, double u) {
        return g.div(Approx.exact(1).plus(clampedExp(g))).times(u);
    }

    private static double[] concat(double[] a, double[] b) {
        double[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
