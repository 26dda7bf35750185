// Token + position embedding: forward against fp64, backward against central differences,
// with repeated tokens (scatter-add) and T < maxT (rows of wpe past T get no gradient).
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class EmbeddingTest {

    @Test
    void backwardMatchesFiniteDifferences() {
        GradCheck gc = new GradCheck();
        int b = 3, t = 4, maxT = 6, c = 5, vocab = 4;   // 12 tokens over 4 ids: repeats are certain
        int[] tokens = gc.tokens(b * t, vocab);
        float[] wte = gc.uniform(vocab * c, 1);
        float[] wpe = gc.uniform(maxT * c, 1);
        float[] dout = gc.uniform(b * t * c, 1);
        Embedding embedding = new Embedding(vocab, maxT, c);
        try (Backend be = GradCheck.cpuBackend();
             Tensor tok = GradCheck.upload(be, tokens, b, t);
             Tensor wteT = GradCheck.upload(be, wte, vocab, c);
             Tensor wpeT = GradCheck.upload(be, wpe, maxT, c);
             Tensor out = GradCheck.zeros(be, b, t, c);
             Tensor doutT = GradCheck.upload(be, dout, b, t, c);
             Tensor dwte = GradCheck.zeros(be, vocab, c);
             Tensor dwpe = GradCheck.zeros(be, maxT, c)) {
            embedding.forward(be, tok, wteT, wpeT, out);
            embedding.backward(be, tok, doutT, dwte, dwpe);
            double[] wted = GradCheck.widen(wte), wped = GradCheck.widen(wpe), r = GradCheck.widen(dout);
            gc.assertGradient("embedding forward", be.toHost(out), RefOps.embedding(tokens, b, t, wted, wped, c));
            gc.assertGradient("embedding dwte", be.toHost(dwte), GradCheck.finiteDifference(wted,
                    v -> RefOps.dot(r, RefOps.embedding(tokens, b, t, v, wped, c))));
            double[] dwpeRef = GradCheck.finiteDifference(wped,
                    v -> RefOps.dot(r, RefOps.embedding(tokens, b, t, wted, v, c)));
            float[] dwpeGot = be.toHost(dwpe);
            gc.assertGradient("embedding dwpe", dwpeGot, dwpeRef);
            for (int i = t * c; i < maxT * c; i++) {
                assertEquals(0f, dwpeGot[i], "wpe rows at positions >= T must get no gradient");
            }
        }
    }
}
