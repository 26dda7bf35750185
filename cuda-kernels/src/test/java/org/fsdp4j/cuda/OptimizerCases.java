// Emulator cases for optimizer.cu through OptimizerLauncher: AdamW at step 1 (the largest bias
// corrections) and later steps, with and without weight decay and a loss-scale factor, SGD with
// momentum, each grad dtype. The reference takes AdamW's scalars in exact arithmetic; the
// launcher's fp32 roundings of lr/(1 − β1^t), √(1 − β2^t) and 1 − lr·wd count as one rounding
// each, so a launcher that computed them differently would show.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;

final class OptimizerCases {

    private OptimizerCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(adamW(r, DType.F32, 1000, new AdamWStep(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1f)));
        out.add(adamW(r, DType.BF16, 777, new AdamWStep(6e-4f, 0.9f, 0.999f, 1e-8f, 0f, 10, 1f / 1024)));
        out.add(adamW(r, DType.F16, 1, new AdamWStep(3e-4f, 0.8f, 0.99f, 1e-6f, 0.01f, 3, 0.5f)));
        out.add(sgd(r, DType.F32, 1000, 0.1f, 0.9f, 0f, 1f));
        out.add(sgd(r, DType.F16, 777, 0.01f, 0.5f, 1e-4f, 1f / 256));
        out.add(sgd(r, DType.BF16, 1, 0.05f, 0.99f, 0.1f, 2f));
        return out;
    }

    /** A scalar the launcher rounds from double to float once. */
    private static Approx roundedOnce(double exact) {
        return new Approx(exact, Math.abs(exact) * Approx.U);
    }

    private static EmuCase adamW(Random r, DType gradDt, int n, AdamWStep s) {
        EmuCase c = new EmuCase("adamw_kernel", "grad " + gradDt + " n=" + n + " step " + s.step() + " wd "
                + s.weightDecay() + " gradScale " + s.gradScale());
        Tensor param = c.device.allocate(DType.F32, n);
        Tensor grad = c.device.allocate(gradDt, n);
        Tensor m = c.device.allocate(DType.F32, n);
        Tensor v = c.device.allocate(DType.F32, n);
        double[] p0 = c.device.put(param, EmuData.uniform(r, n, 1));
        double[] g0 = c.device.put(grad, EmuData.uniform(r, n, 1));
        double[] m0 = c.device.put(m, EmuData.uniform(r, n, 0.1));
        double[] v0 = c.device.put(v, EmuData.uniform(r, n, 0, 0.01));
        new OptimizerLauncher(c.device).adamW(null, param, grad, m, v, s);

        double b1 = s.beta1();
        double b2 = s.beta2();
        Approx stepSize = roundedOnce(s.lr() / (1 - Math.pow(b1, s.step())));
        Approx bc2Sqrt = roundedOnce(Math.sqrt(1 - Math.pow(b2, s.step())));
        Approx decay = roundedOnce(1 - (double) s.lr() * s.weightDecay());
        Approx one = Approx.exact(1);
        Approx[] refP = new Approx[n];
        Approx[] refM = new Approx[n];
        Approx[] refV = new Approx[n];
        for (int i = 0; i < n; i++) {
            Approx g = Approx.exact(g0[i]).times(s.gradScale());
            Approx mi = Approx.exact(m0[i]).times(b1).plus(one.minus(Approx.exact(b1)).times(g));
            Approx vi = Approx.exact(v0[i]).times(b2).plus(one.minus(Approx.exact(b2)).times(g.times(g)));
            Approx denom = vi.sqrt().div(bc2Sqrt).plus(Approx.exact(s.eps()));
            refP[i] = Approx.exact(p0[i]).times(decay).minus(stepSize.times(mi.div(denom)));
            refM[i] = mi;
            refV[i] = vi;
        }
        c.expect("param", param, refP);
        c.expect("m", m, refM);
        c.expect("v", v, refV);
        return c;
    }

    private static EmuCase sgd(Random r, DType gradDt, int n, float lr, float momentum, float wd, float gradScale) {
        EmuCase c = new EmuCase("sgd_momentum_kernel", "grad " + gradDt + " n=" + n + " lr " + lr + " momentum "
                + momentum + " wd " + wd + " gradScale " + gradScale);
        Tensor param = c.device.allocate(DType.F32, n);
        Tensor grad = c.device.allocate(gradDt, n);
        Tensor buf = c.device.allocate(DType.F32, n);
        double[] p0 = c.device.put(param, EmuData.uniform(r, n, 1));
        double[] g0 = c.device.put(grad, EmuData.uniform(r, n, 1));
        double[] b0 = c.device.put(buf, EmuData.uniform(r, n, 0.1));
        new OptimizerLauncher(c.device).sgdMomentum(null, param, grad, buf, lr, momentum, wd, gradScale);
        Approx[] refP = new Approx[n];
        Approx[] refB = new Approx[n];
        for (int i = 0; i < n; i++) {
            Approx g = Approx.exact(g0[i]).times(gradScale).plus(Approx.exact(p0[i]).times(wd));
            Approx b = Approx.exact(b0[i]).times(momentum).plus(g);
            refB[i] = b;
            refP[i] = Approx.exact(p0[i]).minus(b.times(lr));
        }
        c.expect("param", param, refP);
        c.expect("buf", buf, refB);
        return c;
    }
}
