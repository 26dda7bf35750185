// Issue 45 item 5 on the CPU backend: real vocabularies (GPT-2's 50,257, Llama's 32,000). The
// embedding backward against a direct O(B·T·C) reference, with repeated ids, and a structural
// check of its cost (the project times nothing in unit tests): it adds only into the rows of the
// batch's tokens (every other dwte row keeps its −0.0 bit for bit, which adding even a zero turns
// into +0.0), so a dense one-hot product over the vocabulary, O(B·T·V·C), fails it; the sums are
// B·T·C whatever V is, plus the O(V) counting sort. And a whole GPT at V = 50,257:
// the gradient of a few wte rows (a repeated token, the last row, an absent one, which the tied
// head alone reaches) against central differences of the fp64 reference loss.
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Map;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class VocabSizesTest {

    @ParameterizedTest(name = "V = {0}, positions {1}")
    @CsvSource({"50257, true", "32000, false"})
    void embeddingBackwardTouchesOnlyTheBatchsRows(int vocab, boolean positions) {
        GradCheck gc = new GradCheck();
        int b = 3, t = 40, c = 12;
        int[] pool = {0, 7, 7, 1234, vocab / 2, vocab - 1};   // 120 positions over 5 ids: every id repeats
        int[] tokens = new int[b * t];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = pool[gc.random.nextInt(pool.length)];
        }
        float[] dout = gc.uniform(b * t * c, 1);
        float[] negZeros = new float[vocab * c];   // dwte (V, C), all −0.0
        Arrays.fill(negZeros, -0.0f);
        try (Backend be = GradCheck.cpuBackend();
             Tensor tok = GradCheck.upload(be, tokens, b, t);
             Tensor doutT = GradCheck.upload(be, dout, b, t, c);
             Tensor dwte = GradCheck.upload(be, negZeros, vocab, c);
             Tensor dwpe = positions ? GradCheck.zeros(be, t, c) : null) {
            be.embeddingBackward(tok, doutT, dwte, dwpe);
            float[] got = be.toHost(dwte);
            boolean[] present = new boolean[vocab];
            double[] ref = new double[vocab * c];   // Σ dout over each token's positions, fp64
            for (int p = 0; p < tokens.length; p++) {
                present[tokens[p]] = true;
                for (int j = 0; j < c; j++) {
                    ref[tokens[p] * c + j] += dout[p * c + j];
                }
            }
            int touched = 0;
            for (int v = 0; v < vocab; v++) {
                for (int j = 0; j < c; j++) {
                    int i = v * c + j;
                    if (!present[v]) {
                        assertEquals(Float.floatToRawIntBits(-0.0f), Float.floatToRawIntBits(got[i]),
                                "row " + v + " is not in the batch, yet the backward wrote it");
                    } else if (Float.floatToRawIntBits(got[i]) != Float.floatToRawIntBits(-0.0f)) {
                        touched++;
                    }
                }
            }
            assertEquals(5 * c, touched, "the batch's five rows, every column");
            int[] rows = {0, 7, 1234, vocab / 2, vocab - 1};
            float[] gotRows = new float[rows.length * c];
            double[] refRows = new double[rows.length * c];
            for (int k = 0; k < rows.length; k++) {
                System.arraycopy(got, rows[k] * c, gotRows, k * c, c);
                System.arraycopy(ref, rows[k] * c, refRows, k * c, c);
            }
            gc.assertGradient("dwte rows of V = " + vocab, gotRows, refRows);
        }
    }

    @Test
    void gptAtGpt2sVocabularyHasTheFiniteDifferenceGradientOnWteRows() {
        GradCheck gc = new GradCheck();
        int vocab = 50_257;
        GptConfig cfg = new GptConfig(vocab, 8, 1, 2, 8);
        int b = 2, t = 6;
        int[] tokens = {7, 7, vocab - 1, 7, 300, vocab - 1, 7, 12, 7, vocab - 1, 300, 7};   // 7 six times
        int[] targets = {7, vocab - 1, 9, 300, 7, 7, 45_000, 7, 12, 7, 1, vocab - 1};
        float lossScale = 2f;
        RefGpt ref = new RefGpt(cfg);
        try (Backend be = GradCheck.cpuBackend();
             GptModel model = new GptModel(cfg, be, false);
             ParameterStore store = new ParameterStore(be, model.units());
             Tensor tok = GradCheck.upload(be, tokens, b, t);
             Tensor tgt = GradCheck.upload(be, targets, b, t)) {
            Map<String, double[]> params = gc.randomParams(store);
            float loss = model.forward(tok, tgt, UnitHooks.NONE);
            double refLoss = ref.loss(params, tokens, targets, b, t);
            assertEquals(refLoss, loss, 1e-5 * refLoss, "loss (seed " + gc.seed + ")");
            assertTrue(loss > 9 && loss < 13, "about ln 50,257 = 10.8 at random weights: " + loss);
            model.backward(UnitHooks.NONE, lossScale);
            float[] dwte = store.grad("wte");
            double[] wte = params.get("wte");
            int c = cfg.embedDim();
            int[] rows = {7, vocab - 1, 20_000};   // six positions, three positions, absent (the head's gradient only)
            float[] got = new float[rows.length * c];
            double[] fd = new double[rows.length * c];
            for (int k = 0; k < rows.length; k++) {
                for (int j = 0; j < c; j++) {
                    int i = rows[k] * c + j;
                    double saved = wte[i];
                    wte[i] = saved + GradCheck.FD_STEP;
                    double plus = lossScale * ref.loss(params, tokens, targets, b, t);
                    wte[i] = saved - GradCheck.FD_STEP;
                    double minus = lossScale * ref.loss(params, tokens, targets, b, t);
                    wte[i] = saved;
                    fd[k * c + j] = (plus - minus) / (2 * GradCheck.FD_STEP);
                    got[k * c + j] = dwte[i];
                }
            }
            gc.assertClose("dwte rows 7, 50,256 and 20,000", got, fd, GptModelGradientTest.GRAD_ATOL,
                    GptModelGradientTest.GRAD_RTOL);
        }
    }
}
