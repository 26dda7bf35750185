// Hugging Face Llama checkpoints (LlamaForCausalLM's safetensors) as a LlamaModel's starting weights.
// fsdp4j's Llama parameters carry Hugging Face's names (LlamaParams), and its layouts too (Linear
// weights (out, in); q and k in rotate_half order, as Hugging Face's conversion from Meta's
// checkpoints left them; RMSNorm gains (C)), so the mapping is the identity:
//
//   model.embed_tokens.weight                          (V, C)       root
//   model.layers.{i}.input_layernorm.weight            (C)          block i
//   model.layers.{i}.self_attn.q_proj.weight           (H·D, C)
//   model.layers.{i}.self_attn.k_proj.weight           (Hkv·D, C)
//   model.layers.{i}.self_attn.v_proj.weight           (Hkv·D, C)
//   model.layers.{i}.self_attn.o_proj.weight           (C, H·D)
//   model.layers.{i}.post_attention_layernorm.weight   (C)
//   model.layers.{i}.mlp.gate_proj.weight              (F, C)
//   model.layers.{i}.mlp.up_proj.weight                (F, C)
//   model.layers.{i}.mlp.down_proj.weight              (C, F)
//   model.norm.weight                                  (C)          root
//   lm_head.weight                                     (V, C)       root
//
// The config must match the checkpoint's (Hugging Face's config.json: vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, rope_theta,
// rms_norm_eps; max_position_embeddings may be lowered). Shapes are checked on open; rope_theta and
// rms_norm_eps are not in the weights, so they are the caller's to get right. Not supported: tied
// embeddings (no lm_head.weight: Llama 3.2 1B/3B), rope_scaling, attention or MLP biases.
package org.fsdp4j.model;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.weights.PretrainedWeights;
import org.fsdp4j.weights.TensorRef;

public final class LlamaWeights {

    private LlamaWeights() {
    }

    /** fsdp4j's parameter name → the checkpoint tensor holding it, for a model of {@code config}. */
    public static Map<String, TensorRef> mapping(LlamaConfig config) {
        Map<String, TensorRef> m = new LinkedHashMap<>();
        for (List<ParamSpec> unit : config.unitSpecs()) {
            for (ParamSpec p : unit) {
                m.put(p.name(), TensorRef.asIs(p.name()));
            }
        }
        return m;
    }

    /**
     * The tensors a Llama checkpoint may carry that no parameter takes: the rotary inverse frequencies
     * older checkpoints saved (model.layers.{i}.self_attn.rotary_emb.inv_freq), which fsdp4j recomputes.
     */
    public static boolean ignorable(String tensor) {
        return tensor.endsWith(".self_attn.rotary_emb.inv_freq");
    }

    /** The checkpoint at {@code location} (a .safetensors file or a Hugging Face model directory), checked against {@code config}. */
    public static PretrainedWeights open(Path location, LlamaConfig config) {
        return PretrainedWeights.open(location, config.unitSpecs(), mapping(config), LlamaWeights::ignorable);
    }
}
