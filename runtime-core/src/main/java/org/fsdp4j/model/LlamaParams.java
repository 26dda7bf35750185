// The Llama units' parameters, in their order within each unit (the ordinal is the index passed to
// Unit.param/grad), named exactly as Hugging Face's LlamaForCausalLM names them, so a checkpoint's
// tensors map onto them one to one (LlamaWeights). Init: N(0, 0.02) for the embedding, the head and
// every projection but the two that write into the residual stream (o_proj, down_proj), which get
// 0.02/√(2L) as GPT-2's do; unit RMSNorm gains; decay on the 2-D weights only.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.ParamSpec;

final class LlamaParams {

    /** The root unit: the token embedding (first forward segment), the final norm and the untied head. */
    enum Root {
        EMBED("model.embed_tokens.weight"),
        NORM("model.norm.weight"),
        HEAD("lm_head.weight");

        final String paramName;

        Root(String paramName) {
            this.paramName = paramName;
        }

        ParamSpec spec(LlamaConfig cfg) {
            long c = cfg.embedDim();
            switch (this) {
                case EMBED: return ParamSpec.normal(paramName, INIT_STD, true, cfg.vocabSize(), c);   // (V, C)
                case NORM: return ParamSpec.ones(paramName, c);                                        // (C)
                case HEAD: return ParamSpec.normal(paramName, INIT_STD, true, cfg.vocabSize(), c);    // (V, C)
                default: throw new AssertionError(this);
            }
        }
    }

    /** One block: "model.layers.<layer>.<suffix>". */
    enum Block {
        INPUT_NORM("input_layernorm.weight"),
        Q("self_attn.q_proj.weight"),
        K("self_attn.k_proj.weight"),
        V("self_attn.v_proj.weight"),
        O("self_attn.o_proj.weight"),
        POST_NORM("post_attention_layernorm.weight"),
        GATE("mlp.gate_proj.weight"),
        UP("mlp.up_proj.weight"),
        DOWN("mlp.down_proj.weight");

        final String suffix;

        Block(String suffix) {
            this.suffix = suffix;
        }

        ParamSpec spec(LlamaConfig cfg, int layer) {
            long c = cfg.embedDim();
            long kv = cfg.kvDim();
            long f = cfg.hiddenDim();
            String n = blockParamName(layer, suffix);
            double residualStd = INIT_STD / Math.sqrt(2.0 * cfg.numLayers());
            switch (this) {
                case INPUT_NORM: case POST_NORM: return ParamSpec.ones(n, c);                 // (C)
                case Q: return ParamSpec.normal(n, INIT_STD, true, c, c);                     // (H·D, C)
                case K: case V: return ParamSpec.normal(n, INIT_STD, true, kv, c);            // (Hkv·D, C)
                case O: return ParamSpec.normal(n, residualStd, true, c, c);                  // (C, H·D)
                case GATE: case UP: return ParamSpec.normal(n, INIT_STD, true, f, c);         // (F, C)
                case DOWN: return ParamSpec.normal(n, residualStd, true, c, f);               // (C, F)
                default: throw new AssertionError(this);
            }
        }
    }

    /** The std of the embedding, the head and the projections (Hugging Face's initializer_range). */
    static final double INIT_STD = 0.02;

    private LlamaParams() {
    }

    static String blockParamName(int layer, String suffix) {
        return "model.layers." + layer + "." + suffix;
    }

    static List<ParamSpec> root(LlamaConfig cfg) {
        List<ParamSpec> specs = new ArrayList<>();
        for (Root p : Root.values()) {
            specs.add(p.spec(cfg));
        }
        return List.copyOf(specs);
    }

    static List<ParamSpec> block(LlamaConfig cfg, int layer) {
        List<ParamSpec> specs = new ArrayList<>();
        for (Block p : Block.values()) {
            specs.add(p.spec(cfg, layer));
        }
        return List.copyOf(specs);
    }
}
