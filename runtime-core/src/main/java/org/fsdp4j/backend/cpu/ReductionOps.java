// Whole-tensor reductions (Σx², Σx, any non-finite) in fp64 over fixed chunks combined in
// order: the gradient-norm clip and the loss-scale check read these, so they are deterministic.
// Σx² runs on vector lanes (Simd.sumOfSquares: DL fp64 partials per chunk, added in lane order).
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class ReductionOps {

    private ReductionOps() {
    }

    static double sumOfSquares(CpuThreads threads, Tensor t) {
        Shapes.floating("sumOfSquares", t);
        return Pointwise.sum(threads, t, (x, n) -> Simd.sumOfSquares(x, n, Simd.laneScratch()));
    }

    static double sum(CpuThreads threads, Tensor t) {
        Shapes.floating("sum", t);
        return Pointwise.sum(threads, t, (x, n) -> {
            double s = 0;
            for (int i = 0; i < n; i++) {
                s += x[i];
            }
            return s;
        });
    }

    static boolean hasNonFinite(CpuThreads threads, Tensor t) {
        Shapes.floating("hasNonFinite", t);
        double bad = Pointwise.sum(threads, t, (x, n) -> {   // count of chunks with one
            for (int i = 0; i < n; i++) {
                if (!Float.isFinite(x[i])) {
                    return 1;
                }
            }
            return 0;
        });
        return bad > 0;
    }

    /** out[0] (one F32 element) += value, rounded once to fp32. */
    static void addInto(Tensor out, double value) {
        java.nio.FloatBuffer f = CpuStorage.of(out).floats();
        int at = Math.toIntExact(out.offset());
        f.put(at, (float) (f.get(at) + value));
    }
}
