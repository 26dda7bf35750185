// Tensors of seeded Gaussian values on any backend, for tests that compare two computations of
// the same inputs.
package org.fsdp4j.testing;

import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;

public final class RandomTensors {

    private RandomTensors() {
    }

    /** A new fp32 activation tensor of {@code shape} holding N(0, 1) draws from {@code r}. */
    public static Tensor gaussian(Ops ops, Random r, long... shape) {
        Tensor t = ops.allocate(DType.F32, MemoryCategory.ACTIVATIONS, shape);
        float[] f = new float[Math.toIntExact(t.numel())];
        for (int i = 0; i < f.length; i++) {
            f[i] = (float) r.nextGaussian();
        }
        ops.copyFromHost(f, 0, t);
        return t;
    }
}
