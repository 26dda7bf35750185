// The chunk loop every pointwise op shares (add, scale, cast, GELU, the optimizers, the
// reductions): each tensor's chunk is loaded into fp32 scratch, the body computes on the
// arrays, and the results are rounded back on store. The ops then hold only their math.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.Tensor;

final class Pointwise {

    /** Computes on one chunk: x[i] holds n elements of the i-th loaded tensor. */
    @FunctionalInterface
    interface Body {
        void run(float[][] x, int n);
    }

    /** Folds one chunk of a tensor (x, n elements) into its share of a sum. */
    @FunctionalInterface
    interface Fold {
        double apply(float[] x, int n);
    }

    private Pointwise() {
    }

    /**
     * Over the elements of {@code loaded} (equal numel, checked by the caller) chunk by chunk:
     * loads x[i] from loaded[i], runs {@code body}, then stores x[j] into stored[j]. So an op lists
     * the tensors it writes first, in both arrays (e.g. adamW: loaded {p, m, v, g}, stored {p, m, v}).
     */
    static void map(CpuThreads threads, Tensor[] loaded, Tensor[] stored, Body body) {
        Elements[] in = new Elements[loaded.length];
        for (int i = 0; i < loaded.length; i++) {
            in[i] = Elements.of(loaded[i]);
        }
        Elements[] out = new Elements[stored.length];
        for (int j = 0; j < stored.length; j++) {
            out[j] = Elements.of(stored[j]);
        }
        threads.forChunks(loaded[0].numel(), ElementwiseOps.GRAIN, (chunk, from, to) -> {
            int n = (int) (to - from);
            float[][] x = new float[in.length][];
            for (int i = 0; i < in.length; i++) {
                x[i] = Scratch.floats(i, n);
                in[i].load(from, x[i], 0, n);
            }
            body.run(x, n);
            for (int j = 0; j < out.length; j++) {
                out[j].store(x[j], 0, from, n);
            }
        });
    }

    /** Σ over chunks of fold(chunk), combined in chunk order (deterministic). */
    static double sum(CpuThreads threads, Tensor t, Fold fold) {
        Elements e = Elements.of(t);
        return threads.sum(t.numel(), ElementwiseOps.GRAIN, (from, to) -> {
            int n = (int) (to - from);
            float[] x = Scratch.floats(0, n);
            e.load(from, x, 0, n);
            return fold.apply(x, n);
        });
    }
}
