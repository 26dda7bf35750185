// The shape of a Llama-style model (Touvron et al. 2023; Hugging Face's LlamaForCausalLM): pre-norm
// blocks with RMSNorm, rotary position embeddings, grouped-query attention (numKvHeads key/value
// heads shared by groups of numHeads / numKvHeads query heads) and a SwiGLU MLP of width
// hiddenDim, no biases anywhere, and an LM head untied from the token embedding. Validated once;
// the presets are what `--model llama --preset NAME` names. What the family's parts need (the
// planner's activations, the Hugging Face config and checkpoint layout, the model) is reached from
// here, so no code outside the family's files asks whether a model is a Llama.
package org.fsdp4j.model;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.weights.PretrainedWeights;

/**
 * @param vocabSize   tokens (V)
 * @param maxSeqLen   the longest sequence (the rotary tables' length)
 * @param numLayers   blocks (L)
 * @param numHeads    query heads (H)
 * @param numKvHeads  key/value heads (Hkv), dividing H: H for multi-head attention, 1 for multi-query
 * @param embedDim    width of the residual stream (C = H · head size)
 * @param hiddenDim   width of the SwiGLU MLP (F; Hugging Face's intermediate_size)
 * @param ropeTheta   base of the rotary angles: position t turns pair i by t · θ^(−2i/head size)
 * @param normEps     RMSNorm's epsilon (Hugging Face's rms_norm_eps)
 */
public record LlamaConfig(int vocabSize, int maxSeqLen, int numLayers, int numHeads, int numKvHeads, int embedDim,
                          int hiddenDim, double ropeTheta, double normEps) implements ModelConfig {

    /** The published model the presets follow, at its size. */
    public static final String FULL_SIZE_PRESET = "tinyllama-1.1b";

    private static final Map<String, LlamaConfig> PRESETS = new LinkedHashMap<>();

    static {
        // Byte-level, about the size of the GPT presets of the same names (tiny: 0.43M parameters,
        // small: 9.6M), so the two families train side by side in the same time.
        PRESETS.put("tiny", new LlamaConfig(256, 128, 2, 4, 2, 128, 352, 10_000, 1e-5));
        PRESETS.put("small", new LlamaConfig(256, 256, 6, 6, 2, 384, 1024, 10_000, 1e-5));
        PRESETS.put("bench-4x256", new LlamaConfig(256, 128, 4, 4, 2, 256, 704, 10_000, 1e-5));
        // TinyLlama-1.1B's shape (Zhang et al. 2024), the Llama 2 architecture at 1.1B parameters.
        PRESETS.put(FULL_SIZE_PRESET, new LlamaConfig(32_000, 2048, 22, 32, 4, 2048, 5632, 10_000, 1e-5));
    }

    public LlamaConfig {
        if (vocabSize <= 0 || maxSeqLen <= 0 || numLayers <= 0 || numHeads <= 0 || numKvHeads <= 0 || embedDim <= 0
                || hiddenDim <= 0) {
            throw new IllegalArgumentException("Llama config needs positive sizes, got vocabSize=" + vocabSize
                    + " maxSeqLen=" + maxSeqLen + " numLayers=" + numLayers + " numHeads=" + numHeads + " numKvHeads="
                    + numKvHeads + " embedDim=" + embedDim + " hiddenDim=" + hiddenDim);
        }
        if (embedDim % numHeads != 0) {
            throw new IllegalArgumentException("embedDim " + embedDim + " is not divisible by numHeads " + numHeads
                    + ": pick a head count that divides the width");
        }
        if (numHeads % numKvHeads != 0) {
            throw new IllegalArgumentException("numKvHeads " + numKvHeads + " does not divide numHeads " + numHeads
                    + ": each key/value head serves a whole group of query heads");
        }
        if ((embedDim / numHeads) % 2 != 0) {
            throw new IllegalArgumentException("the head size " + embedDim / numHeads + " (embedDim " + embedDim + " / "
                    + numHeads + " heads) is odd: rotary embeddings turn pairs of dims, so it must be even");
        }
        ModelConfig.checkDimension("the number of layers", numLayers, MAX_LAYERS);
        ModelConfig.checkDimension("the width", embedDim, MAX_WIDTH);
        ModelConfig.checkDimension("the MLP width", hiddenDim, MAX_WIDTH);
        ModelConfig.checkDimension("the vocabulary", vocabSize, MAX_VOCAB);
        ModelConfig.checkDimension("the context", maxSeqLen, MAX_CONTEXT);
        if (!(ropeTheta > 1) || !Double.isFinite(ropeTheta)) {
            throw new IllegalArgumentException("ropeTheta must be a finite number above 1, got " + ropeTheta);
        }
        if (!(normEps > 0) || !(normEps < 1)) {
            throw new IllegalArgumentException("normEps must be in (0, 1), got " + normEps);
        }
    }

    /** The preset called {@code name}; an unknown name is an error that lists the known ones. */
    public static LlamaConfig preset(String name) {
        LlamaConfig c = PRESETS.get(name);
        if (c == null) {
            throw new IllegalArgumentException("unknown Llama preset '" + name + "': use one of " + presetNames());
        }
        return c;
    }

    /** Preset names in a stable order: tiny, small, bench-4x256, tinyllama-1.1b. */
    public static List<String> presetNames() {
        return List.copyOf(PRESETS.keySet());
    }

    public LlamaConfig withSeqLen(int seqLen) {
        return new LlamaConfig(vocabSize, seqLen, numLayers, numHeads, numKvHeads, embedDim, hiddenDim, ropeTheta,
                normEps);
    }

    @Override
    public ModelFamily family() {
        return ModelFamily.LLAMA;
    }

    @Override
    public HfLlamaConfig hf() {
        return HfLlamaConfig.of(this);
    }

    /** Rotary positions: computed, not learned. */
    @Override
    public boolean learnsPositions() {
        return false;
    }

    /** Key/value heads, MLP width, rotary base and eps stay this model's; the checks name the flags, not these fields. */
    @Override
    public LlamaConfig withFlags(int layers, int width, int heads, int vocab, int context, Set<String> given) {
        String hiddenFlag = given.contains("--hidden") ? " (--hidden)" : "";
        String headsFlag = given.contains("--heads") ? " (--heads)" : "";
        if (heads % numKvHeads != 0) {
            throw new IllegalArgumentException("the preset's " + numKvHeads + " key/value heads do not divide " + heads
                    + " heads (--heads): pick a multiple of " + numKvHeads);
        }
        if ((width / heads) % 2 != 0) {
            throw new IllegalArgumentException("the head size " + width / heads + " (width " + width + hiddenFlag + " / "
                    + heads + " heads" + headsFlag + ") is odd: rotary embeddings turn pairs of dims, so pick a width and"
                    + " head count whose quotient is even");
        }
        return new LlamaConfig(vocab, context, layers, heads, numKvHeads, width, hiddenDim, ropeTheta, normEps);
    }

    /** Width of one attention head (D). */
    public int headDim() {
        return embedDim / numHeads;
    }

    /** Width of the key and value projections: Hkv · D. */
    public int kvDim() {
        return numKvHeads * headDim();
    }

    /** Query heads per key/value head. */
    public int groupSize() {
        return numHeads / numKvHeads;
    }

    /**
     * Parameters of one block: two RMSNorm gains (2C), q and o (C·C each), k and v (Hkv·D·C each),
     * gate, up and down (F·C each).
     */
    public long blockParameterCount() {
        long c = embedDim;
        long perWidth = Math.addExact(Math.addExact(2 + 2 * c, 2L * kvDim()), 3L * hiddenDim);   // 2 + 2C + 2·Hkv·D + 3F
        return Math.multiplyExact(perWidth, c);
    }

    /** All parameters: embedding and head (V·C each), the final norm's gain (C), the blocks. */
    @Override
    public long parameterCount() {
        long c = embedDim;
        return Math.addExact(Math.multiplyExact(2L * vocabSize, c) + c, Math.multiplyExact(numLayers, blockParameterCount()));
    }

    @Override
    public List<List<ParamSpec>> unitSpecs() {
        List<List<ParamSpec>> units = new ArrayList<>();
        units.add(LlamaParams.root(this));
        for (int layer = 0; layer < numLayers; layer++) {
            units.add(LlamaParams.block(this, layer));
        }
        return List.copyOf(units);
    }

    @Override
    public LlamaModel create(Ops backend, boolean checkpointActivations) {
        return new LlamaModel(this, backend, checkpointActivations);
    }

    @Override
    public String parameterFormula() {
        return String.format(Locale.ROOT, "model: llama, %d layers, width %d, %d heads (%d key/value of width %d), MLP %d,"
                + " vocab %d, context %d: P = 2·V·C + C + L·(2C + 2C² + 2·Hkv·D·C + 3·F·C) = %,d", numLayers, embedDim,
                numHeads, numKvHeads, headDim(), hiddenDim, vocabSize, maxSeqLen, parameterCount());
    }

    /** The wider of the SwiGLU's width F and 4C. */
    @Override
    public long mlpWidthBound() {
        return Math.max(4L * embedDim, hiddenDim);
    }

    /** LlamaModel's block (RMSNorms, q/k/v projections with Hkv key/value heads, rotary, SwiGLU of F) and untied head. */
    @Override
    public ActivationShape activationShape(long b, long t, long eb, long attSaved, long attTemp) {
        long x = b * t * embedDim;                           // (b, T, C): also q, the merged heads
        long kv = b * t * kvDim();                           // (b, T, Hkv·D): k or v
        long f = b * t * hiddenDim;                          // (b, T, F): gate, up, their product
        long att = attSaved;                                 // the kept probabilities
        long scores = attTemp;                               // a (b, H, T, T) temporary (0 when fused)
        long rows = b * t;                                   // RMSNorm rstd, per-token losses (fp32)
        long logits = b * t * vocabSize;                     // (b, T, V)
        long f32 = ActivationShape.F32;
        // a block's saved activations: both RMSNorms' outputs, the attention residual, q and the
        // merged heads (1 x each), k and v, the probabilities, gate, up and their product, two rstd
        long saved = eb * (5 * x + 2 * kv + att + 3 * f) + f32 * 2 * rows;
        // inside the attention's forward, after rmsnorm1's output and rstd and the residual (2x + rows):
        // the fused qkv next to q, k, v; the scores next to the probabilities; the heads' outputs
        // next to the merged ones
        long inAttention = Math.max(2 * (x + 2 * kv), Math.max(x + 2 * kv + att + scores, 3 * x + 2 * kv + att));
        long forwardPeak = Math.max(saved, eb * (2 * x + inAttention) + f32 * rows);
        // a block's backward on top of what it keeps: dnorm2 with the MLP's dhidden, dgate, dup; or
        // dnorm1 with the attention's gradients at their most (dy and dyHeads, the score gradients with
        // dv, dq, dk, dv with dpreatt, or dq, dk, dv with the fused dqkv)
        long inAttentionBackward = Math.max(Math.max(2 * x, x + scores + kv), Math.max(Math.max(2 * scores + kv,
                x + scores + 2 * kv), 2 * (x + 2 * kv)));
        long backwardTemps = eb * Math.max(x + 3 * f, x + inAttentionBackward);
        long head = eb * (x + logits) + f32 * 2 * rows;      // final RMSNorm output and rstd, logits, losses
        long tables = f32 * t * headDim();                   // the rotary cosines and sines, (T, D/2) each
        return new ActivationShape(eb * x, saved, forwardPeak, backwardTemps, head, tables,
                eb * Math.max(logits, Math.max(att, Math.max(f, x + 2 * kv))));
    }

    @Override
    public PretrainedWeights openWeights(Path location) {
        return LlamaWeights.open(location, this);
    }

    @Override
    public String describe() {
        return numLayers + " layers, " + numHeads + " heads (" + numKvHeads + " key/value), width " + embedDim
                + ", MLP " + hiddenDim + ", context " + maxSeqLen + ", vocab " + vocabSize;
    }
}
