// Token embedding, plus a learned position embedding where there is one, forward and backward. The backward groups positions by token
// (a stable counting sort), so each dwte row is owned by one task and summed in position
// order: parallel, race-free and deterministic.
package org.fsdp4j.backend.cpu;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Shapes;

final class EmbeddingOps {

    private EmbeddingOps() {
    }

    /** out (B, T, C) = wte[tokens[b,t]] + wpe[t] (wpe null: wte[tokens[b,t]]). */
    static void forward(CpuThreads threads, Tensor tokens, Tensor wte, Tensor wpe, Tensor out) {
        String op = "embeddingForward";
        Shapes.EmbeddingSizes sizes = Shapes.embedding(op, tokens, wte, wpe, out);
        int t = sizes.t();
        int c = sizes.c();
        int[] tok = Elements.loadIndices(op, tokens, wte.dim(0), "token", "position");
        Elements ete = Elements.of(wte);
        Elements epe = wpe == null ? null : Elements.of(wpe);
        Elements eo = Elements.of(out);
        threads.forChunks(tok.length, CpuThreads.rowsPerChunk(c, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] x = Scratch.floats(0, c);
            float[] p = Scratch.floats(1, c);
            for (long bt = from; bt < to; bt++) {
                ete.load((long) tok[(int) bt] * c, x, 0, c);
                if (epe != null) {
                    epe.load((bt % t) * c, p, 0, c);
                    for (int j = 0; j < c; j++) {
                        x[j] += p[j];
                    }
                }
                eo.store(x, 0, bt * c, c);
            }
        });
    }

    /** dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += Σ_b dout[b,t] (unless null); every sum in increasing (b, t) order. */
    static void backward(CpuThreads threads, Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe) {
        String op = "embeddingBackward";
        Shapes.EmbeddingSizes sizes = Shapes.embedding(op, tokens, dwte, dwpe, dout);
        int b = sizes.b();
        int t = sizes.t();
        int c = sizes.c();
        int vocab = sizes.vocab();
        int[] tok = Elements.loadIndices(op, tokens, vocab, "token", "position");
        Elements eg = Elements.of(dout);
        Elements ete = Elements.of(dwte);

        // positions grouped by token, each group in increasing position order
        int[] start = new int[vocab + 1];
        for (int v : tok) {
            start[v + 1]++;
        }
        for (int v = 0; v < vocab; v++) {
            start[v + 1] += start[v];
        }
        int[] fill = start.clone();
        int[] order = new int[tok.length];
        for (int pos = 0; pos < tok.length; pos++) {
            order[fill[tok[pos]]++] = pos;
        }
        int[] used = new int[vocab];
        int numUsed = 0;
        for (int v = 0; v < vocab; v++) {
            if (start[v + 1] > start[v]) {
                used[numUsed++] = v;
            }
        }
        threads.forChunks(numUsed, CpuThreads.rowsPerChunk(c, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] acc = Scratch.floats(0, c);
            float[] g = Scratch.floats(1, c);
            for (long u = from; u < to; u++) {
                int v = used[(int) u];
                ete.load((long) v * c, acc, 0, c);
                for (int k = start[v]; k < start[v + 1]; k++) {
                    eg.load((long) order[k] * c, g, 0, c);
                    for (int j = 0; j < c; j++) {
                        acc[j] += g[j];
                    }
                }
                ete.store(acc, 0, (long) v * c, c);
            }
        });
        if (dwpe == null) {
            return;
        }
        Elements epe = Elements.of(dwpe);
        threads.forChunks(t, CpuThreads.rowsPerChunk((long) b * c, ElementwiseOps.GRAIN), (chunk, from, to) -> {
            float[] acc = Scratch.floats(0, c);
            float[] g = Scratch.floats(1, c);
            for (long pos = from; pos < to; pos++) {
                epe.load(pos * c, acc, 0, c);
                for (int bi = 0; bi < b; bi++) {
                    eg.load(((long) bi * t + pos) * c, g, 0, c);
                    for (int j = 0; j < c; j++) {
                        acc[j] += g[j];
                    }
                }
                epe.store(acc, 0, pos * c, c);
            }
        });
    }
}
