// Softmax cross-entropy over the vocabulary, one row per token: the forward writes each row's
// loss, the backward overwrites dlogits with (softmax − onehot) · dloss, reading the whole row
// first so dlogits may be the logits tensor itself.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class CrossEntropyOps {

    private CrossEntropyOps() {
    }

    /** losses (N) = logsumexp(logits[n]) − logits[n, targets[n]]. */
    static void forward(CpuThreads threads, Tensor logits, Tensor targets, Tensor losses) {
        String op = "crossEntropyForward";
        int v = Shapes.crossEntropyForward(logits, targets, losses);
        int[] tgt = Elements.loadIndices(op, targets, v, "target", "row");
        Elements el = Elements.of(logits);
        Elements eo = Elements.of(losses);
        threads.forChunks(tgt.length, CpuThreads.rowsPerChunk(v, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] x = Scratch.floats(0, v);
            float[] out = Scratch.floats(1, (int) (to - from));
            for (long r = from; r < to; r++) {
                el.load(r * v, x, 0, v);
                float max = max(x, v);
                double sum = sumExp(x, v, max);
                out[(int) (r - from)] = (float) (Math.log(sum) + max - x[tgt[(int) r]]);
            }
            eo.store(out, 0, from, (int) (to - from));
        });
    }

    static void backward(CpuThreads threads, Tensor logits, Tensor targets, float dloss, Tensor dlogits) {
        String op = "crossEntropyBackward";
        int v = Shapes.crossEntropyBackward(logits, targets, dlogits);
        int[] tgt = Elements.loadIndices(op, targets, v, "target", "row");
        Elements el = Elements.of(logits);
        Elements ed = Elements.of(dlogits);
        threads.forChunks(tgt.length, CpuThreads.rowsPerChunk(v, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] x = Scratch.floats(0, v);
            double[] e = EXPS.get();
            if (e.length < v) {
                e = new double[v];
                EXPS.set(e);
            }
            for (long r = from; r < to; r++) {
                el.load(r * v, x, 0, v);
                float max = max(x, v);
                double sum = 0;
                for (int j = 0; j < v; j++) {   // sumExp's terms, kept: one exp per logit, not two
                    e[j] = Math.exp(x[j] - max);
                    sum += e[j];
                }
                double scale = dloss / sum;
                for (int j = 0; j < v; j++) {
                    x[j] = (float) (e[j] * scale);
                }
                x[tgt[(int) r]] -= dloss;
                ed.store(x, 0, r * v, v);
            }
        });
    }

    /** Per-thread fp64 exps of a row for the backward. */
    private static final ThreadLocal<double[]> EXPS = ThreadLocal.withInitial(() -> new double[0]);

    private static float max(float[] x, int n) {
        float m = Float.NEGATIVE_INFINITY;
        for (int j = 0; j < n; j++) {
            m = Math.max(m, x[j]);
        }
        return m;
    }

    private static double sumExp(float[] x, int n, float max) {
        double s = 0;
        for (int j = 0; j < n; j++) {
            s += Math.exp(x[j] - max);
        }
        return s;
    }
}
