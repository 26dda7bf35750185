// Softmax cross-entropy: the mean loss against fp64, the in-place backward (with a loss scale)
// against central differences of the fp64 mean loss.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.fsdp4j.api.CrossEntropyLoss;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class CrossEntropyLossTest {

    @Test
    void lossAndBackwardMatchFp64() {
        GradCheck gc = new GradCheck();
        int b = 2, t = 3, v = 11, n = b * t;
        float lossScale = 3.5f;
        float[] logits = gc.uniform(n * v, 3);
        int[] targets = gc.tokens(n, v);
        try (Backend be = GradCheck.cpuBackend();
             Tensor logitsT = GradCheck.upload(be, logits, b, t, v);
             Tensor targetsT = GradCheck.upload(be, targets, b, t);
             Tensor losses = be.allocate(DType.F32, MemoryCategory.WORKSPACE, n);
             Tensor mean = be.allocate(DType.F32, MemoryCategory.WORKSPACE, 1)) {
            CrossEntropyLoss.forward(be, logitsT, targetsT, losses, mean);
            float loss = be.toHost(mean)[0];
            double[] ld = GradCheck.widen(logits);
            double ref = RefOps.crossEntropy(ld, targets, n, v);
            assertEquals(ref, loss, 1e-6 * Math.abs(ref), "mean loss (seed " + gc.seed + ")");
            CrossEntropyLoss.backwardInPlace(be, logitsT, targetsT, lossScale);
            gc.assertGradient("dlogits", be.toHost(logitsT), GradCheck.finiteDifference(ld,
                    x -> lossScale * RefOps.crossEntropy(x, targets, n, v)));
        }
    }
}
