// The shape of a built-in model, whatever its family (GptConfig, LlamaConfig): what the trainer,
// the preflight's memory and time estimates, the benchmarks and the run log need to know, and the
// one way to build the model. A run names its family and preset (ModelFamily); everything else
// follows from the record.
package org.fsdp4j.model;

import java.util.List;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;

public interface ModelConfig {

    /** The family this shape belongs to. */
    ModelFamily family();

    int vocabSize();

    /** The longest sequence the model takes (its context). */
    int maxSeqLen();

    int numLayers();

    /** Attention (query) heads. */
    int numHeads();

    /** Width of the residual stream (C). */
    int embedDim();

    /** Every parameter, counted once. */
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

    /** The shape in words for the run header: "2 layers, 4 heads, width 128, context 128, vocab 256". */
    String describe();
}
