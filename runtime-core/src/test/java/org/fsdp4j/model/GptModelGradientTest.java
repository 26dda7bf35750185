// The whole model on a tiny config: logits and loss against the fp64 reference GPT, and the
// gradient of every element of every parameter against central differences of the fp64 loss.
// Parameters are random (not the init, whose zero biases and unit gains would hide mistakes).
package org.fsdp4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.backend.Backend;
import org.junit.jupiter.api.Test;

class GptModelGradientTest {

    // Two blocks, the head and the loss: twice the layer tolerances of GradCheck.
    static final double FORWARD_ATOL = 2 * GradCheck.FORWARD_ATOL;
    static final double FORWARD_RTOL = 2 * GradCheck.FORWARD_RTOL;
    static final double GRAD_ATOL = 2 * GradCheck.GRAD_ATOL;
    static final double GRAD_RTOL = 2 * GradCheck.GRAD_RTOL;

    @Test
    void everyParameterGradientMatchesFiniteDifferences() {
        GradCheck gc = new GradCheck();
        GptConfig cfg = new GptConfig(13, 6, 2, 2, 8);
        int b = 2, t = 5;   // T < maxSeqLen: the last wpe row must get a zero gradient
        float lossScale = 2f;
        int[] tokens = gc.tokens(b * t, cfg.vocabSize());
        int[] targets = gc.tokens(b * t, cfg.vocabSize());
        RefGpt ref = new RefGpt(cfg);
        try (Backend be = GradCheck.cpuBackend();
             GptModel model = new GptModel(cfg, be, false);
             ParameterStore store = new ParameterStore(be, model.units());
             Tensor tok = GradCheck.upload(be, tokens, b, t);
             Tensor tgt = GradCheck.upload(be, targets, b, t)) {
            Map<String, double[]> params = gc.randomParams(store);
            float loss = model.forward(tok, tgt, UnitHooks.NONE);
            gc.assertClose("logits", be.toHost(model.logits()), ref.logits(params, tokens, b, t),
                    FORWARD_ATOL, FORWARD_RTOL);
            double refLoss = ref.loss(params, tokens, targets, b, t);
            assertEquals(refLoss, loss, 1e-5 * refLoss, "loss (seed " + gc.seed + ")");
            model.backward(UnitHooks.NONE, lossScale);

            for (ParameterStore.Entry e : store.entries()) {
                String name = e.spec().name();
                double[] fd = GradCheck.finiteDifference(params.get(name),
                        v -> lossScale * ref.loss(params, tokens, targets, b, t));
                gc.assertClose("d" + name, store.grad(name), fd, GRAD_ATOL, GRAD_RTOL);
            }
            float[] dwpe = store.grad("wpe");
            for (int i = t * cfg.embedDim(); i < dwpe.length; i++) {
                assertEquals(0f, dwpe[i], "wpe rows at positions >= T must get no gradient");
            }
            assertEquals(0, be.memory().liveBytes(org.fsdp4j.api.MemoryCategory.ACTIVATIONS),
                    "backward must free every activation");
        }
    }
}
