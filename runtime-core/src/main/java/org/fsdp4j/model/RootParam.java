// The root unit's parameters, in their order within the unit: the ordinal is the index passed
// to Unit.param/grad, so no code carries magic indices. The LM head reuses wte (tied weights).
package org.fsdp4j.model;

import org.fsdp4j.api.ParamSpec;

enum RootParam {
    WTE("wte"),
    WPE("wpe"),
    LNF_WEIGHT("lnf.weight"),
    LNF_BIAS("lnf.bias");

    /** nanoGPT's std for embeddings and Linear weights. */
    static final double INIT_STD = 0.02;

    final String paramName;

    RootParam(String paramName) {
        this.paramName = paramName;
    }

    ParamSpec spec(GptConfig cfg) {
        long c = cfg.embedDim();
        switch (this) {
            case WTE: return ParamSpec.normal(paramName, INIT_STD, true, cfg.vocabSize(), c);     // (V, C)
            case WPE: return ParamSpec.normal(paramName, INIT_STD, true, cfg.maxSeqLen(), c);     // (maxT, C)
            case LNF_WEIGHT: return ParamSpec.ones(paramName, c);                                  // (C)
            case LNF_BIAS: return ParamSpec.zeros(paramName, c);                                   // (C)
            default: throw new AssertionError(this);
        }
    }
}
