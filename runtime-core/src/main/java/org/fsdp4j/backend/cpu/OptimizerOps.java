// The optimizer updates on flat F32 buffers (a rank's master shard), chunked in parallel.
// AdamW follows PyTorch's operation order (decay, then the bias-corrected step) so that
// parity runs against torch.optim.AdamW agree to the last bits the math allows.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Shapes;
import org.fsdp4j.tensor.Tensor;

final class OptimizerOps {

    private OptimizerOps() {
    }

    static void adamW(CpuThreads threads, Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep s) {
        String op = "adamW";
        Shapes.optimizer(op, param, grad, m, v);
        double bc1 = 1 - Math.pow(s.beta1(), s.step());
        double bc2 = 1 - Math.pow(s.beta2(), s.step());
        float stepSize = (float) (s.lr() / bc1);
        float bc2Sqrt = (float) Math.sqrt(bc2);
        float decay = (float) (1 - (double) s.lr() * s.weightDecay());
        float b1 = s.beta1();
        float b2 = s.beta2();
        float eps = s.eps();
        float gs = s.gradScale();
        Elements ep = Elements.of(param);
        Elements eg = Elements.of(grad);
        Elements em = Elements.of(m);
        Elements ev = Elements.of(v);
        threads.forChunks(param.numel(), ElementwiseOps.GRAIN, (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] p = Scratch.floats(0, n);
            float[] g = Scratch.floats(1, n);
            float[] mm = Scratch.floats(2, n);
            float[] vv = Scratch.floats(3, n);
            ep.load(from, p, 0, n);
            eg.load(from, g, 0, n);
            em.load(from, mm, 0, n);
            ev.load(from, vv, 0, n);
            for (int i = 0; i < n; i++) {
                float gi = gs * g[i];
                float mi = b1 * mm[i] + (1 - b1) * gi;
                float vi = b2 * vv[i] + (1 - b2) * (gi * gi);
                mm[i] = mi;
                vv[i] = vi;
                float denom = (float) Math.sqrt(vi) / bc2Sqrt + eps;
                p[i] = p[i] * decay - stepSize * (mi / denom);
            }
            ep.store(p, 0, from, n);
            em.store(mm, 0, from, n);
            ev.store(vv, 0, from, n);
        });
    }

    static void sgdMomentum(CpuThreads threads, Tensor param, Tensor grad, Tensor buf, float lr, float momentum,
                            float weightDecay, float gradScale) {
        String op = "sgdMomentum";
        Shapes.optimizer(op, param, grad, buf);
        Elements ep = Elements.of(param);
        Elements eg = Elements.of(grad);
        Elements eb = Elements.of(buf);
        threads.forChunks(param.numel(), ElementwiseOps.GRAIN, (chunk, from, to) -> {
            int n = (int) (to - from);
            float[] p = Scratch.floats(0, n);
            float[] g = Scratch.floats(1, n);
            float[] b = Scratch.floats(2, n);
            ep.load(from, p, 0, n);
            eg.load(from, g, 0, n);
            eb.load(from, b, 0, n);
            for (int i = 0; i < n; i++) {
                float gi = gradScale * g[i] + weightDecay * p[i];
                b[i] = momentum * b[i] + gi;
                p[i] -= lr * b[i];
            }
            ep.store(p, 0, from, n);
            eb.store(b, 0, from, n);
        });
    }
}
