// Whole-tensor reductions (Σx², Σx, any non-finite) in fp64 over fixed chunks combined in
// order: the gradient-norm clip and the loss-scale check read these, so they are deterministic.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.backend.Shapes;
import org.fsdp4j.tensor.Tensor;

final class ReductionOps {

    private ReductionOps() {
    }

    static double sumOfSquares(CpuThreads threads, Tensor t) {
        Shapes.floating("sumOfSquares", t);
        Elements e = Elements.of(t);
        return threads.sum(t.numel(), ElementwiseOps.GRAIN, (from, to) -> {
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, n);
            e.load(from, x, 0, n);
            double s = 0;
            for (int i = 0; i < n; i++) {
                s += (double) x[i] * x[i];
            }
            return s;
        });
    }

    static double sum(CpuThreads threads, Tensor t) {
        Shapes.floating("sum", t);
        Elements e = Elements.of(t);
        return threads.sum(t.numel(), ElementwiseOps.GRAIN, (from, to) -> {
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, n);
            e.load(from, x, 0, n);
            double s = 0;
            for (int i = 0; i < n; i++) {
                s += x[i];
            }
            return s;
        });
    }

    static boolean hasNonFinite(CpuThreads threads, Tensor t) {
        Shapes.floating("hasNonFinite", t);
        Elements e = Elements.of(t);
        double bad = threads.sum(t.numel(), ElementwiseOps.GRAIN, (from, to) -> {   // count of chunks with one
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, n);
            e.load(from, x, 0, n);
            for (int i = 0; i < n; i++) {
                if (!Float.isFinite(x[i])) {
                    return 1;
                }
            }
            return 0;
        });
        return bad > 0;
    }
}
