// Emulator cases for crossentropy.cu through CrossEntropyLauncher (one block per row, of the warps
// that cover it up to 512 threads: one warp for V = 1 and 7, sixteen for 1000 and 50,257):
// vocabularies of 1, 7, 1000 and GPT-2's 50,257, targets outside [0, V) (NaN loss and gradient
// rather than an out-of-bounds read), a −inf logit, the backward writing over the logits
// themselves, and each logits dtype. References follow the kernel's fp32 order (Approx).
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class CrossEntropyCases {

    private CrossEntropyCases() {
    }

    static List<EmuCase> cases(Random r) {
        List<EmuCase> out = new ArrayList<>();
        out.add(forward(r, DType.F32, 3, 1));
        out.add(forward(r, DType.F32, 5, 7));
        out.add(forward(r, DType.BF16, 4, 1000));
        out.add(forward(r, DType.F16, 3, 50_257));
        out.add(forward(r, DType.F32, 2, 50_257));
        out.add(backward(r, DType.F32, DType.F32, 3, 1, false));
        out.add(backward(r, DType.F32, DType.F16, 5, 7, false));
        out.add(backward(r, DType.BF16, DType.BF16, 4, 1000, true));
        out.add(backward(r, DType.F16, DType.F32, 2, 50_257, false));
        out.add(backward(r, DType.F32, DType.F32, 2, 50_257, true));
        return out;
    }

    private static long depth(int vocab) {
        // CrossEntropyLauncher's block: each thread sums ⌈V/threads⌉ terms, then two 5-level butterflies
        int threads = CrossEntropyLauncher.threads(vocab);
        return (vocab + threads - 1) / threads + 10;
    }

    /** Targets: random, but row 1 out of range below and (with 3+ rows) row 2 at V itself. */
    private static int[] targets(Random r, int rows, int vocab) {
        int[] t = EmuData.ints(r, rows, 0, vocab);
        if (rows > 1) {
            t[1] = -1;
        }
        if (rows > 2) {
            t[2] = vocab;
        }
        return t;
    }

    /** logits U(−4, 4), one −inf in each row with V > 2 (at a non-target index). */
    private static double[] logits(Random r, int rows, int vocab, int[] targets) {
        double[] v = EmuData.uniform(r, rows * vocab, 4);
        if (vocab > 2) {
            for (int row = 0; row < rows; row++) {
                int j = targets[row] == vocab - 1 ? vocab - 2 : vocab - 1;
                v[row * vocab + j] = Double.NEGATIVE_INFINITY;
            }
        }
        return v;
    }

    /** Per row: the max, Σ exp(x − max), and each exp(x − max), in the kernel's order. */
    private static Approx[] expTerms(double[] x, int row, int vocab, Approx[] maxAndSum) {
        Approx m = Approx.exact(Double.NEGATIVE_INFINITY);
        for (int j = 0; j < vocab; j++) {
            m = Approx.max(m, Approx.exact(x[row * vocab + j]));
        }
        Approx[] e = new Approx[vocab];
        for (int j = 0; j < vocab; j++) {
            e[j] = Approx.exact(x[row * vocab + j]).minus(m).exp();
        }
        maxAndSum[0] = m;
        maxAndSum[1] = Approx.sum(List.of(e), depth(vocab));
        return e;
    }

    private static EmuCase forward(Random r, DType dt, int rows, int vocab) {
        EmuCase c = new EmuCase("cross_entropy_forward_kernel", dt + " N=" + rows + " V=" + vocab);
        Tensor logits = c.device.allocate(dt, rows, vocab);
        Tensor targets = c.device.allocate(DType.I32, rows);
        Tensor losses = c.device.allocate(DType.F32, rows);
        int[] t = targets(r, rows, vocab);
        double[] x = c.device.put(logits, logits(r, rows, vocab, t));
        c.device.putInts(targets, t);
        new CrossEntropyLauncher(c.device).forward(null, logits, targets, losses, rows, vocab);
        Approx[] ref = new Approx[rows];
        for (int row = 0; row < rows; row++) {
            if (t[row] < 0 || t[row] >= vocab) {
                ref[row] = Approx.exact(Double.NaN);
                continue;
            }
            Approx[] ms = new Approx[2];
            expTerms(x, row, vocab, ms);
            ref[row] = ms[1].log().plus(ms[0]).minus(Approx.exact(x[row * vocab + t[row]]));
        }
        c.expect("losses", losses, ref);
        return c;
    }

    /** dlogits = (softmax − onehot)·dloss; with {@code inPlace}, dlogits is the logits tensor. */
    private static EmuCase backward(Random r, DType dt, DType dDt, int rows, int vocab, boolean inPlace) {
        EmuCase c = new EmuCase("cross_entropy_backward_kernel", dt + "->" + (inPlace ? dt + " in place" : dDt)
                + " N=" + rows + " V=" + vocab);
        Tensor logits = c.device.allocate(dt, rows, vocab);
        Tensor targets = c.device.allocate(DType.I32, rows);
        Tensor dlogits = inPlace ? logits : c.device.allocate(dDt, rows, vocab);
        int[] t = targets(r, rows, vocab);
        double[] x = c.device.put(logits, logits(r, rows, vocab, t));
        c.device.putInts(targets, t);
        float dloss = 1f / rows;
        new CrossEntropyLauncher(c.device).backward(null, logits, targets, dloss, dlogits, rows, vocab);
        Approx[] ref = new Approx[rows * vocab];
        for (int row = 0; row < rows; row++) {
            boolean valid = t[row] >= 0 && t[row] < vocab;
            Approx[] ms = new Approx[2];
            Approx[] e = expTerms(x, row, vocab, ms);
            Approx inv = Approx.exact(1).div(ms[1]);
            for (int j = 0; j < vocab; j++) {
                ref[row * vocab + j] = valid
                        ? e[j].times(inv).minus(Approx.exact(j == t[row] ? 1 : 0)).times(dloss)
                        : Approx.exact(Double.NaN);
            }
        }
        c.expect("dlogits", dlogits, ref);
        return c;
    }
}
