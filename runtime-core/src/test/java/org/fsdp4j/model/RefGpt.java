// Test-only fp64 GPT forward built from RefOps, reading parameters by their GptModel names:
// the reference the whole model's logits, loss and gradients are checked against.
package org.fsdp4j.model;

import java.util.Map;

final class RefGpt {

    private final GptConfig cfg;

    RefGpt(GptConfig cfg) {
        this.cfg = cfg;
    }

    /** Logits (B·T, V) for tokens (B·T). */
    double[] logits(Map<String, double[]> p, int[] tokens, int b, int t) {
        int c = cfg.embedDim();
        double[] x = RefOps.embedding(tokens, b, t, p.get("wte"), p.get("wpe"), c);
        for (int l = 0; l < cfg.numLayers(); l++) {
            double[][] bp = new double[BlockParam.values().length][];
            for (BlockParam param : BlockParam.values()) {
                bp[param.ordinal()] = p.get(BlockParam.name(l, param.suffix));
            }
            x = RefOps.block(x, b, t, c, cfg.numHeads(), bp);
        }
        double[] lnf = RefOps.layerNorm(x, b * t, c, p.get("lnf.weight"), p.get("lnf.bias"));
        return RefOps.linear(lnf, b * t, c, p.get("wte"), null, cfg.vocabSize());
    }

    double loss(Map<String, double[]> p, int[] tokens, int[] targets, int b, int t) {
        return RefOps.crossEntropy(logits(p, tokens, b, t), targets, b * t, cfg.vocabSize());
    }
}
