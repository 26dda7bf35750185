// The optimizer updates on flat F32 buffers (a rank's master shard), chunked in parallel.
// AdamW follows PyTorch's operation order (decay, then the bias-corrected step) so that
// parity runs against torch.optim.AdamW agree to the last bits the math allows. The vector loop
// (Simd) does per lane what the scalar tail does: the same bits (a vector sqrt is fp32's correctly
// rounded square root, which is what rounding the fp64 Math.sqrt to fp32 gives).
package org.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.AdamWStep;
import org.fsdp4j.backend.Shapes;

final class OptimizerOps {

    private OptimizerOps() {
    }

    static void adamW(CpuThreads threads, Tensor param, Tensor grad, Tensor m, Tensor v, AdamWStep s) {
        Shapes.optimizer("adamW", param, grad, m, v);
        double bc1 = 1 - Math.pow(s.beta1(), s.step());
        double bc2 = 1 - Math.pow(s.beta2(), s.step());
        float stepSize = (float) (s.lr() / bc1);
        float bc2Sqrt = (float) Math.sqrt(bc2);
        float decay = (float) (1 - (double) s.lr() * s.weightDecay());
        float b1 = s.beta1();
        float b2 = s.beta2();
        float eps = s.eps();
        float gs = s.gradScale();
        float ob1 = 1 - b1;
        float ob2 = 1 - b2;
        Pointwise.map(threads, new Tensor[] {param, m, v, grad}, new Tensor[] {param, m, v},
                (x, n) -> adamWChunk(x[0], x[1], x[2], x[3], n, b1, b2, ob1, ob2, gs, bc2Sqrt, eps, decay, stepSize));
    }

    /** One chunk of AdamW: p, mm, vv updated in place from g (n elements). */
    @CompiledAlone
    private static void adamWChunk(float[] p, float[] mm, float[] vv, float[] g, int n, float b1, float b2, float ob1,
                                   float ob2, float gs, float bc2Sqrt, float eps, float decay, float stepSize) {
        int i = 0;
        for (; i <= n - Simd.FL; i += Simd.FL) {
            FloatVector gi = FloatVector.fromArray(Simd.F, g, i).mul(gs);
            FloatVector mi = FloatVector.fromArray(Simd.F, mm, i).mul(b1).add(gi.mul(ob1));
            FloatVector vi = FloatVector.fromArray(Simd.F, vv, i).mul(b2).add(gi.mul(gi).mul(ob2));
            mi.intoArray(mm, i);
            vi.intoArray(vv, i);
            FloatVector denom = vi.sqrt().div(bc2Sqrt).add(eps);
            FloatVector.fromArray(Simd.F, p, i).mul(decay).sub(mi.div(denom).mul(stepSize)).intoArray(p, i);
        }
        for (; i < n; i++) {
            float gi = gs * g[i];
            float mi = b1 * mm[i] + ob1 * gi;
            float vi = b2 * vv[i] + ob2 * (gi * gi);
            mm[i] = mi;
            vv[i] = vi;
            float denom = (float) Math.sqrt(vi) / bc2Sqrt + eps;
            p[i] = p[i] * decay - stepSize * (mi / denom);
        }
    }

    static void sgdMomentum(CpuThreads threads, Tensor param, Tensor grad, Tensor buf, float lr, float momentum,
                            float weightDecay, float gradScale) {
        Shapes.optimizer("sgdMomentum", param, grad, buf);
        Pointwise.map(threads, new Tensor[] {param, buf, grad}, new Tensor[] {param, buf}, (x, n) -> {
            float[] p = x[0];
            float[] b = x[1];
            float[] g = x[2];
            for (int i = 0; i < n; i++) {
                float gi = gradScale * g[i] + weightDecay * p[i];
                b[i] = momentum * b[i] + gi;
                p[i] -= lr * b[i];
            }
        });
    }
}
