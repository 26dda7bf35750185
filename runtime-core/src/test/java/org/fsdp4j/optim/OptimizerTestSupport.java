// Shared fixture for the optimizer tests: a flat fp32 parameter and gradient split into two
// segments (one decayed, one not) at an uneven offset, as FSDP shard slices would be, with
// fresh random values and the fp64 mirror the scalar references update.
package org.fsdp4j.optim;

import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.testing.Tolerances;

final class OptimizerTestSupport implements AutoCloseable {

    static final int NUMEL = 101;
    static final int SPLIT = 37;   // [0, 37) decayed, [37, 101) not

    final long seed = System.nanoTime();
    final Random random = new Random(seed);
    final Backend backend = Backends.create(Device.CPU, new MemoryTracker("optim-test"), 2);
    final Tensor param = backend.allocate(DType.F32, MemoryCategory.PARAMS, NUMEL);   // (NUMEL)
    final Tensor grad = backend.allocate(DType.F32, MemoryCategory.GRADS, NUMEL);     // (NUMEL)
    final double[] refParam = new double[NUMEL];

    OptimizerTestSupport() {
        float[] p = randomFloats(1);
        backend.copyFromHost(p, 0, param);
        for (int i = 0; i < NUMEL; i++) {
            refParam[i] = p[i];
        }
    }

    List<OptimizerState.Target> targets() {
        return List.of(new OptimizerState.Target(param.view(0, SPLIT), grad.view(0, SPLIT), true),
                new OptimizerState.Target(param.view(SPLIT, NUMEL - SPLIT), grad.view(SPLIT, NUMEL - SPLIT), false));
    }

    static boolean decayed(int i) {
        return i < SPLIT;
    }

    /** Fresh random gradient values, uploaded; returned as the fp32 values the backend saw. */
    float[] newGradient() {
        float[] g = randomFloats(1);
        backend.copyFromHost(g, 0, grad);
        return g;
    }

    float[] randomFloats(double scale) {
        float[] x = new float[NUMEL];
        for (int i = 0; i < NUMEL; i++) {
            x[i] = (float) ((random.nextDouble() * 2 - 1) * scale);
        }
        return x;
    }

    /** |actual − ref| ≤ atol + rtol·|ref| element for element. */
    void assertClose(String what, float[] actual, double[] ref, double atol, double rtol) {
        double[] got = new double[actual.length];
        for (int i = 0; i < got.length; i++) {
            got[i] = actual[i];
        }
        Tolerances.assertClose(what, ref, got, atol, rtol, seed);
    }

    @Override
    public void close() {
        param.close();
        grad.close();
        backend.close();
    }
}
