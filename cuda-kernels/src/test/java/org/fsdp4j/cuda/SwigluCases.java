// Emulator cases for swiglu.cu through SwigluLauncher. The reference value is the SiLU itself in
// fp64 with its limits (ActivationReference: SiLU(−∞) = −0, SiLU'(+∞) = 1), times up, and the error
// bound is that of the kernel's own fp32 operation order (Approx), tails and selects included: so
// a formula that is wrong somewhere (the exp clamp once kept SiLU(−3e38) at −1.82) fails there.
// Edges: ±0, gates where σ saturates (±20), around the exp clamp (±87 .. ±90: σ(−90) is subnormal
// in fp32) and the tail's bounds (−80, −151), huge, infinite and NaN gates, the largest and
// smallest normals, values fp16 cannot hold (7e4 becomes inf); out aliasing the gate; every dtype
// mix of the forward.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.BackendConformanceTest.FLOATS;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.cpu.ActivationReference;

final class SwigluCases {

    /** swiglu.cu's selects: the tail forms below TAIL, −0 below ZERO, SiLU' = 1 above ONE. */
    private static final double TAIL = -80;
    private static final double ZERO = -151;
    private static final double ONE = 80;
    /** e^−64, which the kernel holds rounded to fp32 (EXP_MINUS_TAIL_SHIFT): that rounding is its error. */
    private static final Approx EXP_MINUS_64 = new Approx(Math.exp(-64), Math.abs((float) Math.exp(-64) - Math.exp(-64)));

    private static final double[] EDGES = GeluCases.concat(new double[] {20, -20, 90, -90, 7e4, -79.99, -80.01,
        79.99, 80.01, -150.99, -151.01}, GeluCases.doubles(ActivationReference.EDGES));

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
        double[] g = c.device.put(gate, n < 2 * EDGES.length ? EmuData.uniform(r, n, 8)
                : EmuData.withEdges(EmuData.uniform(r, n, 8), EDGES));
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
        for (int i = 0; i < n; i++) {
            Approx gi = Approx.exact(g[i]);
            Approx du = Approx.exact(d[i]).times(u[i]);
            refGate[i] = Approx.exact(dg0[i]).plus(du.times(slope(gi)));
            refUp[i] = Approx.exact(du0[i]).plus(Approx.exact(d[i]).times(silu(gi, true)));
        }
        c.expect("dgate", dgate, refGate);
        c.expect("dup", dup, refUp);
        return c;
    }

    /** silu_exp: e^(−g), or e^(g + 64) below TAIL, the exponent clamped to [−87, 88] as exp_clamped. */
    private static Approx kernelExp(Approx g) {
        return (g.v() < TAIL ? g.plus(Approx.exact(64)) : g.times(-1)).clamp(-87, 88).exp();
    }

    /**
     * SiLU(g) in fp64 with the bound of the kernel's fp32 form: −0 below ZERO, (g·e)·e^−64 below
     * TAIL, else g / (1 + e) in the forward and g·s, s = 1 / (1 + e), in the backward.
     */
    private static Approx silu(Approx g, boolean backward) {
        Approx one = Approx.exact(1);
        Approx kernel;
        if (g.v() < ZERO) {
            kernel = Approx.exact(-0.0);
        } else if (g.v() < TAIL) {
            kernel = g.times(kernelExp(g)).times(EXP_MINUS_64);
        } else if (backward) {
            kernel = g.times(one.div(one.plus(kernelExp(g))));
        } else {
            kernel = g.div(one.plus(kernelExp(g)));
        }
        return new Approx(ActivationReference.silu(g.v()), kernel.e());
    }

    /** SiLU'(g) in fp64 with the bound of the kernel's form: 1 above ONE, −0 below ZERO, ((1 + g)·e)·e^−64 below TAIL, else s·(1 + g·(1 − s)). */
    private static Approx slope(Approx g) {
        Approx one = Approx.exact(1);
        Approx kernel;
        if (g.v() > ONE) {
            kernel = one;
        } else if (g.v() < ZERO) {
            kernel = Approx.exact(-0.0);
        } else if (g.v() < TAIL) {
            kernel = one.plus(g).times(kernelExp(g)).times(EXP_MINUS_64);
        } else {
            Approx s = one.div(one.plus(kernelExp(g)));
            kernel = s.times(one.plus(g.times(one.minus(s))));
        }
        return new Approx(ActivationReference.siluGrad(g.v()), kernel.e());
    }

    /** SiLU(g) · u, in swiglu.cu's order. */
    private static Approx forward(Approx g, double u) {
        return silu(g, false).times(u);
    }
}
