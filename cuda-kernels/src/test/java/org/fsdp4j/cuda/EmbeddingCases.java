// Emulator cases for embedding.cu through EmbeddingLauncher: the forward (a token outside [0, V)
// gives NaN), and the backward's three kernels (dwpe summed over the batch in order, the
// "present" marks, dwte summed per token in ascending position), for vocabularies of 1, 5, 7
// and 50,257 (most of whose blocks find their token absent), T = 1, and more positions and
// channels than the dwte kernel's 256 threads (both of its loops wrap). Token ids repeat often,
// so the position-ordered compaction (ballot + shared memory) matters. Without a position table
// (a null wpe, as a rotary model passes) the forward copies the token's row and the backward
// launches no dwpe kernel.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
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
        out.add(backward(r, DType.F32, DType.F32, 2, 5, 45, 7));
        out.add(backward(r, DType.BF16, DType.F32, 3, 100, 300, 5));
        out.add(backward(r, DType.F16, DType.BF16, 1, 1, 10, 1));
        out.add(backward(r, DType.F32, DType.F16, 2, 8, 33, 50_257));
        out.add(backwardWithoutPositions(r, DType.BF16, DType.BF16, 3, 7, 40, 6));
        return out;
    }

    private static String shape(int b, int t, int c, int v) {
        return "B=" + b + " T=" + t + " C=" + c + " V=" + v;
    }

    /** Tokens in [0, V), the last one −1 where there are several (invalid: skipped, or NaN). */
    private static int[] tokens(Random r, int bt, int vocab) {
        int[] tok = EmuData.ints(r, bt, 0, Math.min(vocab, 1000));
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

    private static EmuCase backward(Random r, DType doutDt, DType gradDt, int b, int t, int c, int vocab) {
        EmuCase k = new EmuCase(List.of("embedding_backward_wpe_kernel", "embedding_mark_kernel",
                "embedding_backward_wte_kernel"), doutDt + "->" + gradDt + " " + shape(b, t, c, vocab));
        Tensor tokens = k.device.allocate(DType.I32, b, t);
        Tensor dout = k.device.allocate(doutDt, b, t, c);
        Tensor dwte = k.device.allocate(gradDt, vocab, c);
        Tensor dwpe = k.device.allocate(gradDt, t, c);
        Tensor present = k.device.allocate(DType.I32, vocab);
        int[] tok = tokens(r, b * t, vocab);
        k.device.putInts(tokens, tok);
        double[] g = k.device.put(dout, EmuData.uniform(r, b * t * c, 1));
        double[] te0 = k.device.put(dwte, EmuData.uniform(r, vocab * c, 1));
        double[] pe0 = k.device.put(dwpe, EmuData.uniform(r, t * c, 1));
        new EmbeddingLauncher(k.device).backward(null, tokens, dout, dwte, dwpe, present, b, t, c, vocab);

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
        double[] refPresent = new double[vocab];
        for (int v = 0; v < vocab; v++) {
            refPresent[v] = positions.get(v).isEmpty() ? 0 : 1;
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
        k.expectExact("present", present, refPresent);
        return k;
    }

    /** The backward of an embedding without positions: the mark and dwte kernels only. */
    private static EmuCase backwardWithoutPositions(Random r, DType doutDt, DType gradDt, int b, int t, int c,
                                                    int vocab) {
        EmuCase k = new EmuCase(List.of("embedding_mark_kernel", "embedding_backward_wte_kernel"),
                doutDt + "->" + gradDt + " no wpe " + shape(b, t, c, vocab));
        Tensor tokens = k.device.allocate(DType.I32, b, t);
        Tensor dout = k.device.allocate(doutDt, b, t, c);
        Tensor dwte = k.device.allocate(gradDt, vocab, c);
        Tensor present = k.device.allocate(DType.I32, vocab);
        int[] tok = tokens(r, b * t, vocab);
        k.device.putInts(tokens, tok);
        double[] g = k.device.put(dout, EmuData.uniform(r, b * t * c, 1));
        double[] te0 = k.device.put(dwte, EmuData.uniform(r, vocab * c, 1));
        new EmbeddingLauncher(k.device).backward(null, tokens, dout, dwte, null, present, b, t, c, vocab);
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
