// Emulator cases for embedding.cu through EmbeddingLauncher: the forward (a token outside [0, V)
// gives NaN), and the backward's kernels (dwpe summed over the batch in order; the dwte path's
// counts, prefix sum, stable grouping of positions by token and per-row sums in ascending
// position, its whole scratch checked exactly), for vocabularies of 1, 5, 7, GPT-2's 50,257 and
// Llama's 32,000 (most of whose rows are absent), T = 1, more positions than one tile of the
// grouping kernel and more channels than the dwte kernel's 256 threads. Real batches repeat ids:
// some cases draw from a few ids only, one gives every position the same token (one group of all
// B·T positions). Without a position table (a null wpe, as a rotary model passes) the forward
// copies the token's row and the backward launches no dwpe kernel.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.IntStream;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class EmbeddingCases {

    private EmbeddingCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(forward(r, DType.F32, DType.F32, DType.F32, 2, 5, 45, 7));
        out.add(forward(r, DType.BF16, DType.BF16, DType.F16, 1, 1, 300, 1));
        out.add(forward(r, DType.F16, DType.F16, DType.BF16, 3, 33, 64, 50_257));
        out.add(forward(r, DType.BF16, null, DType.BF16, 2, 9, 40, 11));
        out.add(forward(r, DType.F32, null, DType.BF16, 1, 3, 257, 3));
        out.add(backward(r, DType.F32, DType.F32, 2, 5, 45, 7, 1000));
        out.add(backward(r, DType.BF16, DType.F32, 3, 100, 300, 5, 1000));
        out.add(backward(r, DType.F16, DType.BF16, 1, 1, 10, 1, 1000));
        out.add(backward(r, DType.F32, DType.F16, 2, 8, 33, 50_257, 1000));
        out.add(backward(r, DType.F32, DType.F32, 2, 300, 24, 50_257, 40));
        out.add(backward(r, DType.BF16, DType.F32, 1, 520, 16, 32_000, 1));
        out.add(backwardWithoutPositions(r, DType.BF16, DType.BF16, 3, 7, 40, 6));
        return out;
    }

    private static String shape(int b, int t, int c, int v) {
        return "B=" + b + " T=" + t + " C=" + c + " V=" + v;
    }

    /** Tokens in [0, V), the last one −1 where there are several (invalid: skipped, or NaN). */
    private static int[] tokens(Random r, int bt, int vocab) {
        return tokens(r, bt, vocab, 1000);
    }

    /** As tokens(r, bt, vocab), drawn from the first min(V, distinct) ids (few: many repeats), the first V − 1. */
    private static int[] tokens(Random r, int bt, int vocab, int distinct) {
        int[] tok = EmuData.ints(r, bt, 0, Math.min(vocab, distinct));
        if (bt > 1) {
            tok[bt - 1] = -1;
        }
        if (bt > 2) {
            tok[0] = vocab - 1;   // the last row of wte
        }
        return tok;
    }

    private static EmuCase forward(Random r, DType wteDt, DType wpeDt, DType outDt, int b, int t, int c, int vocab) {
        EmuCase k = new EmuCase("embedding_forward_kernel", wteDt + "+" + (wpeDt == null ? "no wpe" : wpeDt) + "->"
                + outDt + " " + shape(b, t, c, vocab));
        Tensor tokens = k.device.allocate(DType.I32, b, t);
        Tensor wte = k.device.allocate(wteDt, vocab, c);
        Tensor wpe = wpeDt == null ? null : k.device.allocate(wpeDt, t, c);
        Tensor out = k.device.allocate(outDt, b, t, c);
        int[] tok = tokens(r, b * t, vocab);
        k.device.putInts(tokens, tok);
        double[] te = k.device.put(wte, EmuData.uniform(r, vocab * c, 2));
        double[] pe = wpe == null ? null : k.device.put(wpe, EmuData.uniform(r, t * c, 2));
        new EmbeddingLauncher(k.device).forward(null, tokens, wte, wpe, out, b, t, c, vocab);
        Approx[] ref = new Approx[b * t * c];
        for (int bt = 0; bt < b * t; bt++) {
            for (int j = 0; j < c; j++) {
                int v = tok[bt];
                ref[bt * c + j] = v < 0 || v >= vocab ? Approx.exact(Double.NaN)
                        : pe == null ? Approx.exact(te[v * c + j])
                        : Approx.exact(te[v * c + j]).plus(Approx.exact(pe[(bt % t) * c + j]));
            }
        }
        k.expect("out", out, ref);
        return k;
    }

    static EmuCase backward(Random r, DType doutDt, DType gradDt, int b, int t, int c, int vocab,
                            int distinct) {
        EmuCase k = new EmuCase(List.of("embedding_backward_wpe_kernel", "embedding_count_kernel",
                "embedding_scan_kernel", "embedding_group_kernel", "embedding_backward_wte_kernel"),
                doutDt + "->" + gradDt + " " + shape(b, t, c, vocab) + " ids<" + distinct);
        Tensor tokens = k.device.allocate(DType.I32, b, t);
        Tensor dout = k.device.allocate(doutDt, b, t, c);
        Tensor dwte = k.device.allocate(gradDt, vocab, c);
        Tensor dwpe = k.device.allocate(gradDt, t, c);
        Tensor scratch = k.device.allocate(DType.I32, EmbeddingLauncher.scratchInts(b * t, vocab));
        int[] tok = tokens(r, b * t, vocab, distinct);
        k.device.putInts(tokens, tok);
        // stale values: the launcher must zero what it reads, and leave invalid positions' slots alone
        k.device.putInts(scratch, IntStream.generate(() -> -1)
                .limit(EmbeddingLauncher.scratchInts(b * t, vocab)).toArray());
        double[] g = k.device.put(dout, EmuData.uniform(r, b * t * c, 1));
        double[] te0 = k.device.put(dwte, EmuData.uniform(r, vocab * c, 1));
        double[] pe0 = k.device.put(dwpe, EmuData.uniform(r, t * c, 1));
        new EmbeddingLauncher(k.device).backward(null, tokens, dout, dwte, dwpe, scratch, b, t, c, vocab);

        Approx[] refWpe = new Approx[t * c];
        for (int pos = 0; pos < t; pos++) {
            for (int j = 0; j < c; j++) {
                List<Approx> terms = new ArrayList<>(List.of(Approx.exact(pe0[pos * c + j])));
                for (int bi = 0; bi < b; bi++) {
                    terms.add(Approx.exact(g[(bi * t + pos) * c + j]));
                }
                refWpe[pos * c + j] = Approx.sum(terms, b + 1);
            }
        }
        List<List<Integer>> positions = new ArrayList<>();
        for (int v = 0; v < vocab; v++) {
            positions.add(new ArrayList<>());
        }
        for (int p = 0; p < tok.length; p++) {
            if (tok[p] >= 0 && tok[p] < vocab) {
                positions.get(tok[p]).add(p);
            }
        }
        Approx[] refWte = new Approx[vocab * c];
        for (int v = 0; v < vocab; v++) {
            for (int j = 0; j < c; j++) {
                List<Approx> terms = new ArrayList<>(List.of(Approx.exact(te0[v * c + j])));
                for (int p : positions.get(v)) {
                    terms.add(Approx.exact(g[p * c + j]));
                }
                refWte[v * c + j] = Approx.sum(terms, terms.size());
            }
        }
        k.expect("dwpe", dwpe, refWpe);
        k.expect("dwte", dwte, refWte);
        k.expectExact("scratch", scratch, groupedScratch(positions, b * t));
        return k;
    }

    /**
     * The dwte path's scratch after a backward: first slots (V+1: token v's positions start at [v],
     * [V] = the valid positions), cursors (V: each at its group's end, [v + 1]), then the positions
     * grouped by token in ascending order (B·T; the slots of invalid positions untouched: the case's −1).
     */
    static double[] groupedScratch(List<List<Integer>> positions, int bt) {
        int vocab = positions.size();
        double[] out = new double[(int) EmbeddingLauncher.scratchInts(bt, vocab)];
        Arrays.fill(out, 2 * vocab + 1, out.length, -1);
        int slot = 0;
        for (int v = 0; v < vocab; v++) {
            out[v] = slot;
            for (int p : positions.get(v)) {
                out[2 * vocab + 1 + slot++] = p;
            }
            out[vocab + 1 + v] = slot;
        }
        out[vocab] = slot;
        return out;
    }

    /** The backward of an embedding without positions: the dwte path only (count, scan, group, sum). */
    private static EmuCase backwardWithoutPositions(Random r, DType doutDt, DType gradDt, int b, int t, int c,
                                                    int vocab) {
        EmuCase k = new EmuCase(List.of("embedding_count_kernel", "embedding_scan_kernel", "embedding_group_kernel",
                "embedding_backward_wte_kernel"),
                doutDt + "->" + gradDt + " no wpe " + shape(b, t, c, vocab));
        Tensor tokens = k.device.allocate(DType.I32, b, t);
        Tensor dout = k.device.allocate(doutDt, b, t, c);
        Tensor dwte = k.device.allocate(gradDt, vocab, c);
        Tensor scratch = k.device.allocate(DType.I32, EmbeddingLauncher.scratchInts(b * t, vocab));
        int[] tok = tokens(r, b * t, vocab);
        k.device.putInts(tokens, tok);
        double[] g = k.device.put(dout, EmuData.uniform(r, b * t * c, 1));
        double[] te0 = k.device.put(dwte, EmuData.uniform(r, vocab * c, 1));
        new EmbeddingLauncher(k.device).backward(null, tokens, dout, dwte, null, scratch, b, t, c, vocab);
        if (k.device.launches().stream().anyMatch(l -> l.kernel().equals("embedding_backward_wpe_kernel"))) {
            throw new AssertionError("the backward without positions launched the dwpe kernel");
        }
        Approx[] refWte = new Approx[vocab * c];
        for (int v = 0; v < vocab; v++) {
            for (int j = 0; j < c; j++) {
                List<Approx> terms = new ArrayList<>(List.of(Approx.exact(te0[v * c + j])));
                for (int p = 0; p < tok.length; p++) {
                    if (tok[p] == v) {
                        terms.add(Approx.exact(g[p * c + j]));
                    }
                }
                refWte[v * c + j] = Approx.sum(terms, terms.size());
            }
        }
        k.expect("dwte", dwte, refWte);
        return k;
    }
}
