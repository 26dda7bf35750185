// One transformer block's parameters, in their order within the block's unit: the ordinal is
// the index passed to Unit.param/grad. Names are "h.<layer>.<suffix>", as in nanoGPT/HF GPT-2.
// Init follows nanoGPT: N(0, 0.02) for Linear weights, 0.02/√(2L) for the two projections that
// write into the residual stream, zero biases, unit LayerNorm gains; decay on 2-D weights only.
package org.fsdp4j.model;

import org.fsdp4j.api.ParamSpec;

enum BlockParam {
    LN1_WEIGHT("ln1.weight"),
    LN1_BIAS("ln1.bias"),
    QKV_WEIGHT("attn.qkv.weight"),
    QKV_BIAS("attn.qkv.bias"),
    ATTN_PROJ_WEIGHT("attn.proj.weight"),
    ATTN_PROJ_BIAS("attn.proj.bias"),
    LN2_WEIGHT("ln2.weight"),
    LN2_BIAS("ln2.bias"),
    FC_WEIGHT("mlp.fc.weight"),
    FC_BIAS("mlp.fc.bias"),
    MLP_PROJ_WEIGHT("mlp.proj.weight"),
    MLP_PROJ_BIAS("mlp.proj.bias");

    final String suffix;

    BlockParam(String suffix) {
        this.suffix = suffix;
    }

    static String name(int layer, String suffix) {
        return "h." + layer + "." + suffix;
    }

    ParamSpec spec(GptConfig cfg, int layer) {
        long c = cfg.embedDim();
        String n = name(layer, suffix);
        double std = RootParam.INIT_STD;
        double residualStd = RootParam.INIT_STD / Math.sqrt(2.0 * cfg.numLayers());
        switch (this) {
            case LN1_WEIGHT: case LN2_WEIGHT: return ParamSpec.ones(n, c);            // (C)
            case LN1_BIAS: case LN2_BIAS: return ParamSpec.zeros(n, c);               // (C)
            case QKV_WEIGHT: return ParamSpec.normal(n, std, true, 3 * c, c);          // (3C, C)
            case QKV_BIAS: return ParamSpec.zeros(n, 3 * c);                           // (3C)
            case ATTN_PROJ_WEIGHT: return ParamSpec.normal(n, residualStd, true, c, c); // (C, C)
            case ATTN_PROJ_BIAS: return ParamSpec.zeros(n, c);                         // (C)
            case FC_WEIGHT: return ParamSpec.normal(n, std, true, 4 * c, c);           // (4C, C)
            case FC_BIAS: return ParamSpec.zeros(n, 4 * c);                            // (4C)
            case MLP_PROJ_WEIGHT: return ParamSpec.normal(n, residualStd, true, c, 4 * c); // (C, 4C)
            case MLP_PROJ_BIAS: return ParamSpec.zeros(n, c);                          // (C)
            default: throw new AssertionError(this);
        }
    }
}
