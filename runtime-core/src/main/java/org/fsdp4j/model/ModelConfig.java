// The shape of a built-in model, whatever its family (GptConfig, LlamaConfig): what the trainer,
// the preflight's memory and time estimates, the planner's activation counts, the benchmarks and the
// run log need to know, its Hugging Face config and checkpoint layout, and the one way to build the
// model. A family is this one type, so code outside a family's own files never asks which family it
// has; adding one means a record here and its files beside it. A run names its family and preset
// (ModelFamily); everything else follows from the record.
package org.fsdp4j.model;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.weights.PretrainedWeights;

public sealed interface ModelConfig permits GptConfig, LlamaConfig {

    // The largest dimensions a model may have: far beyond any model trained today, and small enough
    // that one parameter's size fits a long. The totals are checked separately, in exact arithmetic
    // (checkParameterCount; Planner.checkActivations), since dimensions within these limits can
    // still multiply past one.
    /** Blocks (--layers). */
    int MAX_LAYERS = 10_000;
    /** Width of the residual stream (--hidden), and of a Llama's MLP. */
    int MAX_WIDTH = 1 << 20;
    /** Tokens of the vocabulary (--vocab). */
    int MAX_VOCAB = 1 << 24;
    /** Context length (--context). */
    int MAX_CONTEXT = 1 << 24;
    /** Parameters of the whole model: 2^48, about 2.8e14, so that bytes per parameter times it fit a long. */
    long MAX_PARAMETERS = 1L << 48;

    /** The family this shape belongs to. */
    ModelFamily family();

    /** This shape as its family's Hugging Face config.json spells it (a checkpoint's index, the safetensors export's metadata). */
    HfModelConfig hf();

    /** Whether the root holds learned position embeddings (a GPT's wpe), so that --context sizes the root too. */
    boolean learnsPositions();

    /**
     * This family's model with the shape flags' values (--layers, --hidden, --heads, --vocab,
     * --context), its other settings kept; a shape the family cannot take is refused in the flags'
     * words, naming those of {@code given} (the flags the user typed) where they caused it. The
     * width is already known to divide by {@code heads}.
     */
    ModelConfig withFlags(int layers, int width, int heads, int vocab, int context, Set<String> given);

    int vocabSize();

    /** The longest sequence the model takes (its context). */
    int maxSeqLen();

    int numLayers();

    /** Attention (query) heads. */
    int numHeads();

    /** Width of the residual stream (C). */
    int embedDim();

    /** Every parameter, counted once (exact: an ArithmeticException where it would overflow a long). */
    long parameterCount();

    /** [root, block 0, ..., block L−1]: each unit's parameter specs in the order the unit lays them out. */
    List<List<ParamSpec>> unitSpecs();

    /**
     * The model on {@code backend}; with {@code checkpointActivations} every block keeps only its
     * output in forward and recomputes its internals in backward.
     */
    DecoderModel<?> create(Ops backend, boolean checkpointActivations);

    /** How Fsdp.shard builds this model on each rank: with the rank's ops, checkpointing as the options say. */
    default ModelFactory factory() {
        return ctx -> create(ctx.ops(), ctx.activationCheckpointing());
    }

    /**
     * The pretrained weights at {@code location} (a .safetensors file, or a directory with
     * model.safetensors or model.safetensors.index.json) in this family's checkpoint layout (the
     * GPT: Gpt2Weights; the Llama: LlamaWeights), every parameter's tensor checked against this
     * shape; a location or file that does not fit is one line naming it. The trainer's --init-from.
     */
    PretrainedWeights openWeights(Path location);

    /** The shape in words for the run header: "2 layers, 4 heads, width 128, context 128, vocab 256". */
    String describe();

    /** The planner's first line: the shape and how its parameter count follows from it ("model: ... = 124,439,808"). */
    String parameterFormula();

    /** The widest per-token activation of a block's MLP, for the planner's bound on what it counts (Planner.checkActivations). */
    long mlpWidthBound();

    /**
     * One block's activations and the head's, in bytes, for {@code b} sequences of {@code t} tokens
     * as this family's model allocates and frees them: (b, T, ·)-sized ones, the attention
     * probabilities and the logits in {@code eb} bytes each, norm statistics, per-token losses and
     * rotary tables in fp32. {@code attSaved} and {@code attTemp} are the attention's (b, H, T, T)-scale
     * buffers in elements, as the backend keeps them: the kept probabilities, and each score-sized
     * temporary (0 when the backend fuses the attention).
     */
    ActivationShape activationShape(long b, long t, long eb, long attSaved, long attTemp);

    /**
     * Refuses a dimension beyond its limit, naming it as {@code what} says (a flag, or a config
     * key): "--hidden must be between 1 and 1048576, got 2000000000".
     */
    static int checkDimension(String what, int value, int max) {
        if (value < 1 || value > max) {
            throw new IllegalArgumentException(what + " must be between 1 and " + max + ", got " + value);
        }
        return value;
    }

    /** Refuses a model of more than MAX_PARAMETERS parameters (or so many that counting them overflows). */
    static void checkParameterCount(ModelConfig m) {
        long p;
        try {
            p = m.parameterCount();
        } catch (ArithmeticException e) {
            p = Long.MAX_VALUE;
        }
        if (p > MAX_PARAMETERS) {
            throw new IllegalArgumentException(String.format(java.util.Locale.ROOT, "the model has %s parameters (%s):"
                    + " fsdp4j takes at most 2^48 (about 2.8e14); lower --layers or --hidden",
                    p == Long.MAX_VALUE ? "more than 9.2e18" : String.format(java.util.Locale.ROOT, "%.3g", (double) p),
                    m.describe()));
        }
    }
}
