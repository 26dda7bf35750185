// The shape of a GPT-2 style model, validated once, with the named presets the command line
// and the benchmarks refer to. Everything else (units, parameter specs, the planner's activations,
// the Hugging Face config and checkpoint layout, the model) is derived from these five numbers,
// here, so no code outside the family's files asks whether a model is a GPT.
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

public record GptConfig(int vocabSize, int maxSeqLen, int numLayers, int numHeads, int embedDim)
        implements ModelConfig {

    /** The published model the presets follow, at its size. */
    public static final String FULL_SIZE_PRESET = "gpt2-124m";

    private static final Map<String, GptConfig> PRESETS = new LinkedHashMap<>();

    static {
        // Byte-level, small enough that 300 steps at batch 8-16 take a few minutes on 2 CPU cores.
        PRESETS.put("tiny", new GptConfig(256, 128, 2, 4, 128));
        PRESETS.put("small", new GptConfig(256, 256, 6, 6, 384));
        // The 4-layer, 256-wide model the CPU speed benchmark compares with PyTorch.
        PRESETS.put("bench-4x256", new GptConfig(256, 128, 4, 4, 256));
        PRESETS.put(FULL_SIZE_PRESET, new GptConfig(50257, 1024, 12, 12, 768));
    }

    public GptConfig {
        if (vocabSize <= 0 || maxSeqLen <= 0 || numLayers <= 0 || numHeads <= 0 || embedDim <= 0) {
            throw new IllegalArgumentException("GPT config needs positive sizes, got vocabSize=" + vocabSize
                    + " maxSeqLen=" + maxSeqLen + " numLayers=" + numLayers + " numHeads=" + numHeads
                    + " embedDim=" + embedDim);
        }
        if (embedDim % numHeads != 0) {
            throw new IllegalArgumentException("embedDim " + embedDim + " is not divisible by numHeads " + numHeads
                    + ": pick a head count that divides the width");
        }
        ModelConfig.checkDimension("the number of layers", numLayers, MAX_LAYERS);
        ModelConfig.checkDimension("the width", embedDim, MAX_WIDTH);
        ModelConfig.checkDimension("the vocabulary", vocabSize, MAX_VOCAB);
        ModelConfig.checkDimension("the context", maxSeqLen, MAX_CONTEXT);
    }

    /** The preset called {@code name}; an unknown name is an error that lists the known ones. */
    public static GptConfig preset(String name) {
        GptConfig c = PRESETS.get(name);
        if (c == null) {
            throw new IllegalArgumentException("unknown preset '" + name + "': use one of " + presetNames());
        }
        return c;
    }

    /** Preset names in a stable order: tiny, small, bench-4x256, gpt2-124m. */
    public static List<String> presetNames() {
        return List.copyOf(PRESETS.keySet());
    }

    public GptConfig withSeqLen(int seqLen) {
        return new GptConfig(vocabSize, seqLen, numLayers, numHeads, embedDim);
    }

    public GptConfig withVocab(int vocab) {
        return new GptConfig(vocab, maxSeqLen, numLayers, numHeads, embedDim);
    }

    public GptConfig withLayers(int layers) {
        return new GptConfig(vocabSize, maxSeqLen, layers, numHeads, embedDim);
    }

    @Override
    public ModelFamily family() {
        return ModelFamily.GPT;
    }

    @Override
    public HfGpt2Config hf() {
        return HfGpt2Config.of(this);
    }

    /** wpe: the root's (context, width) positions. */
    @Override
    public boolean learnsPositions() {
        return true;
    }

    @Override
    public GptConfig withFlags(int layers, int width, int heads, int vocab, int context, Set<String> given) {
        return new GptConfig(vocab, context, layers, heads, width);
    }

    @Override
    public List<List<ParamSpec>> unitSpecs() {
        List<List<ParamSpec>> units = new ArrayList<>();
        List<ParamSpec> root = new ArrayList<>();
        for (RootParam p : RootParam.values()) {
            root.add(p.spec(this));
        }
        units.add(List.copyOf(root));
        for (int layer = 0; layer < numLayers; layer++) {
            List<ParamSpec> block = new ArrayList<>();
            for (BlockParam p : BlockParam.values()) {
                block.add(p.spec(this, layer));
            }
            units.add(List.copyOf(block));
        }
        return List.copyOf(units);
    }

    @Override
    public GptModel create(Ops backend, boolean checkpointActivations) {
        return new GptModel(this, backend, checkpointActivations);
    }

    @Override
    public PretrainedWeights openWeights(Path location) {
        return Gpt2Weights.open(location, this);
    }

    @Override
    public String describe() {
        return numLayers + " layers, " + numHeads + " heads, width " + embedDim + ", context " + maxSeqLen + ", vocab "
                + vocabSize;
    }

    @Override
    public String parameterFormula() {
        return String.format(Locale.ROOT, "model: %d layers, width %d, %d heads, vocab %d, context %d:"
                + " P = V·C + T·C + 2C + L·(12C² + 13C) = %,d", numLayers, embedDim, numHeads, vocabSize, maxSeqLen,
                parameterCount());
    }

    /** The MLP's width: 4C. */
    @Override
    public long mlpWidthBound() {
        return 4L * embedDim;
    }

    /** GptModel's block (LayerNorms, fused qkv with biases, GELU MLP of 4C) and head (tied). */
    @Override
    public ActivationShape activationShape(long b, long t, long eb, long attSaved, long attTemp) {
        long x = b * t * embedDim;                           // (b, T, C)
        long att = attSaved;                                 // the kept probabilities
        long scores = attTemp;                               // a (b, H, T, T) temporary (0 when fused)
        long rows = b * t;                                   // LayerNorm mean or rstd, per-token losses (fp32)
        long logits = b * t * vocabSize;                     // (b, T, V)
        long f32 = ActivationShape.F32;
        // a block's saved activations: ln1 and ln2 outputs, q, k, v, the merged heads, the
        // attention residual (1 x each), the MLP's fc and GELU outputs (4 x each), the attention
        // probabilities, and two LayerNorms' mean and rstd
        long saved = eb * (15 * x + att) + f32 * 4 * rows;
        // inside a block's forward: the pre-softmax scores live next to the probabilities
        long forwardPeak = Math.max(saved, eb * (5 * x + att + scores) + f32 * 2 * rows);
        // a block's backward on top of what it keeps: the MLP's (b, T, 4C) gradients (dgelu + dfc
        // + dln2), or the attention's score gradients (datt + dpreatt) or dq, dk with datt
        long backwardTemps = eb * Math.max(9 * x, Math.max(2 * x + 2 * scores, 4 * x + scores));
        long head = eb * (x + logits) + f32 * 3 * rows;      // final LayerNorm output and stats, logits, losses
        return new ActivationShape(eb * x, saved, forwardPeak, backwardTemps, head, 0,
                eb * Math.max(logits, Math.max(att, 4 * x)));
    }

    /** Width of one attention head. */
    public int headDim() {
        return embedDim / numHeads;
    }

    /**
     * Parameters of one block: two LayerNorms (4C), qkv (3C·C + 3C), attn proj (C·C + C),
     * fc (4C·C + 4C), mlp proj (C·4C + C).
     */
    public long blockParameterCount() {
        long c = embedDim;
        return Math.addExact(Math.multiplyExact(12 * c, c), 13 * c);
    }

    /** All parameters; the LM head is tied to wte and adds none. */
    @Override
    public long parameterCount() {
        long c = embedDim;
        long embeddings = Math.multiplyExact((long) vocabSize + maxSeqLen, c) + 2 * c;
        return Math.addExact(embeddings, Math.multiplyExact(numLayers, blockParameterCount()));
    }
}
