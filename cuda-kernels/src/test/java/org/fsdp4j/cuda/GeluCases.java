// Emulator cases for gelu.cu through GeluLauncher. The reference value is the GELU itself in fp64
// with its limits (ActivationReference: GELU(−∞) = −0, GELU'(±∞) = 1 and −0), and the error bound
// is that of the kernel's own fp32 operation order (Approx), tails and selects included: so a
// formula that is wrong somewhere (the exp clamp once kept GELU'(1e12) at 1.0035) fails there.
// Edges: x = −5 and −6 (where 1 + tanh u cancelled), the tail window past the exp clamp
// (−10 .. −12), huge, infinite and NaN inputs, the largest and smallest normals (ActivationReference
// .EDGES), values fp16 cannot hold; and against the CPU backend itself at the same edges.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.BackendConformanceTest.FLOATS;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.backend.cpu.ActivationReference;

final class GeluCases {

    /** The kernel's fp32 constants, exactly. */
    private static final double SCALE = 0.7978845608028654f;
    private static final double CUBIC = 0.044715f;

    /** gelu.cu's selects: the tail forms below TAIL, −0 below ZERO, GELU' = 1 above ONE. */
    private static final double TAIL = -10;
    private static final double ZERO = -12;
    private static final double ONE = 10;
    /** e^−64, which the kernel holds rounded to fp32 (EXP_MINUS_TAIL_SHIFT): that rounding is its error. */
    private static final Approx EXP_MINUS_64 = new Approx(Math.exp(-64), Math.abs((float) Math.exp(-64) - Math.exp(-64)));

    private static final double[] EDGES = concat(new double[] {-5, -6, -10.5, 0.0, -0.0, 1e3, -1e3, 7e4, Double.NaN, 5e19,
        -5e19, -11.999, -12.001, 10.001, -9.999}, doubles(ActivationReference.EDGES));

    private GeluCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        for (DType in : FLOATS) {
            for (DType o : FLOATS) {
                out.add(forward(r, in, o, 1000));
            }
        }
        out.add(forward(r, DType.F32, DType.F32, 1));
        DType[][] backward = {{DType.F32, DType.F32, DType.F32}, {DType.BF16, DType.BF16, DType.BF16},
            {DType.F16, DType.F16, DType.F16}, {DType.BF16, DType.F32, DType.F32}, {DType.F16, DType.BF16, DType.F32}};
        for (DType[] d : backward) {
            out.add(backward(r, d[0], d[1], d[2], 777));
        }
        out.add(againstCpuTwin());
        return out;
    }

    private static EmuCase forward(Random r, DType inDt, DType outDt, int n) {
        EmuCase c = new EmuCase("gelu_forward_kernel", inDt + "->" + outDt + " n=" + n);
        Tensor inp = c.device.allocate(inDt, n);
        Tensor out = c.device.allocate(outDt, n);
        double[] x = c.device.put(inp, n < 2 * EDGES.length ? EmuData.uniform(r, n, 8)
                : EmuData.withEdges(EmuData.uniform(r, n, 8), EDGES));
        new GeluLauncher(c.device).forward(null, inp, out);
        Approx[] ref = new Approx[n];
        for (int i = 0; i < n; i++) {
            ref[i] = forward(Approx.exact(x[i]));
        }
        c.expect("out", out, ref);
        return c;
    }

    private static EmuCase backward(Random r, DType inDt, DType doutDt, DType dinpDt, int n) {
        EmuCase c = new EmuCase("gelu_backward_kernel", inDt + "," + doutDt + "->" + dinpDt + " n=" + n);
        Tensor inp = c.device.allocate(inDt, n);
        Tensor dout = c.device.allocate(doutDt, n);
        Tensor dinp = c.device.allocate(dinpDt, n);
        double[] x = c.device.put(inp, EmuData.withEdges(EmuData.uniform(r, n, 8), EDGES));
        double[] g = c.device.put(dout, EmuData.uniform(r, n, 2));
        double[] d0 = c.device.put(dinp, EmuData.uniform(r, n, 1));
        new GeluLauncher(c.device).backward(null, inp, dout, dinp);
        Approx[] ref = new Approx[n];
        for (int i = 0; i < n; i++) {
            ref[i] = backward(Approx.exact(x[i]), g[i], d0[i]);
        }
        c.expect("dinp", dinp, ref);
        return c;
    }

    /**
     * F32 at the edges: the emulated kernel must give what the CPU backend gives, exactly where that
     * is ±inf or NaN, else within twice the fp64 bound (each of the two is within the bound of the
     * fp64 value).
     */
    private static EmuCase againstCpuTwin() {
        int n = EDGES.length;
        EmuCase c = new EmuCase(List.of("gelu_forward_kernel", "gelu_backward_kernel"), "edges against the CPU backend");
        Tensor inp = c.device.allocate(DType.F32, n);
        Tensor fwd = c.device.allocate(DType.F32, n);
        Tensor dout = c.device.allocate(DType.F32, n);
        Tensor dinp = c.device.allocate(DType.F32, n);
        double[] x = c.device.put(inp, EDGES);
        double[] g = new double[n];
        double[] d0 = new double[n];
        for (int i = 0; i < n; i++) {
            g[i] = i % 2 == 0 ? 1 : -2;
            d0[i] = 0.5;
        }
        c.device.put(dout, g);
        c.device.put(dinp, d0);
        GeluLauncher launcher = new GeluLauncher(c.device);
        launcher.forward(null, inp, fwd);
        launcher.backward(null, inp, dout, dinp);

        float[][] cpu = cpuTwin(x, g, d0);
        Approx[] refFwd = new Approx[n];
        Approx[] refBwd = new Approx[n];
        for (int i = 0; i < n; i++) {
            refFwd[i] = twinWithin(cpu[0][i], forward(Approx.exact(x[i])));
            refBwd[i] = twinWithin(cpu[1][i], backward(Approx.exact(x[i]), g[i], d0[i]));
        }
        c.expect("forward out", fwd, refFwd);
        c.expect("dinp", dinp, refBwd);
        return c;
    }

    private static Approx twinWithin(float cpu, Approx fp64) {
        if (!Float.isFinite(cpu)) {
            return Approx.exact(cpu);
        }
        return new Approx(cpu, 2 * fp64.e());
    }

    /** The CPU backend's GELU forward and backward (dinp += GELU'·dout) on the same F32 inputs. */
    private static float[][] cpuTwin(double[] x, double[] g, double[] d0) {
        int n = x.length;
        try (Backend cpu = Backends.create(Device.CPU, new MemoryTracker("cpu-twin"), 1);
             Tensor tx = cpu.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor ty = cpu.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor tg = cpu.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n);
             Tensor td = cpu.allocate(DType.F32, MemoryCategory.ACTIVATIONS, n)) {
            cpu.copyFromHost(floats(x), 0, tx);
            cpu.copyFromHost(floats(g), 0, tg);
            cpu.copyFromHost(floats(d0), 0, td);
            cpu.geluForward(tx, ty);
            cpu.geluBackward(tx, tg, td);
            return new float[][] {cpu.toHost(ty), cpu.toHost(td)};
        }
    }

    private static float[] floats(double[] v) {
        float[] f = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            f[i] = (float) v[i];
        }
        return f;
    }

    /**
     * gelu_exp in gelu.cu's order, u = SCALE·(x + ((CUBIC·x)·x)·x): e^(−2u), or e^(64 − (−2u)) below
     * TAIL, the exponent clamped to [−87, 88].
     */
    private static Approx kernelExp(Approx x) {
        Approx a = x.plus(x.times(CUBIC).times(x).times(x)).times(SCALE).times(-2);
        return (x.v() < TAIL ? Approx.exact(64).minus(a) : a).clamp(-87, 88).exp();
    }

    /** GELU(x) in fp64 with the bound of the kernel's fp32 form: x / (1 + e), (x·e)·e^−64 below TAIL, −0 below ZERO. */
    static Approx forward(Approx x) {
        Approx kernel;
        if (x.v() < ZERO) {
            kernel = Approx.exact(-0.0);
        } else if (x.v() < TAIL) {
            kernel = x.times(kernelExp(x)).times(EXP_MINUS_64);
        } else {
            kernel = x.div(Approx.exact(1).plus(kernelExp(x)));
        }
        return new Approx(ActivationReference.gelu(x.v()), kernel.e());
    }

    /**
     * dinp + GELU'(x)·dout, GELU' in fp64 with the bound of the kernel's form: 1 above ONE, −0 below
     * ZERO, ((1 + 2x·du)·e)·e^−64 below TAIL, else s + ((2x·(e·s))·s)·du with s = 1/(1 + e) and
     * du = SCALE·(1 + (3·CUBIC·x)·x).
     */
    static Approx backward(Approx x, double dout, double dinp) {
        Approx one = Approx.exact(1);
        Approx du = one.plus(Approx.exact(3).times(CUBIC).times(x).times(x)).times(SCALE);
        Approx kernel;
        if (x.v() > ONE) {
            kernel = one;
        } else if (x.v() < ZERO) {
            kernel = Approx.exact(-0.0);
        } else if (x.v() < TAIL) {
            kernel = one.plus(x.times(2).times(du)).times(kernelExp(x)).times(EXP_MINUS_64);
        } else {
            Approx e = kernelExp(x);
            Approx s = one.div(one.plus(e));
            kernel = s.plus(x.times(2).times(e.times(s)).times(s).times(du));
        }
        Approx grad = new Approx(ActivationReference.geluGrad(x.v()), kernel.e());
        return Approx.exact(dinp).plus(grad.times(dout));
    }

    static double[] doubles(float[] v) {
        double[] d = new double[v.length];
        for (int i = 0; i < v.length; i++) {
            d[i] = v[i];
        }
        return d;
    }

    static double[] concat(double[] a, double[] b) {
        double[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
