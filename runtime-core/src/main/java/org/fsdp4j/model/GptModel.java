// GPT-2 (pre-LN, tied LM head) with explicit forward and backward, as llm.c writes it. The
// model owns no parameters: it reads them through its units' bound views and accumulates
// gradients into the bound gradient views, calling the unit hooks in execution order so the
// FSDP engine can gather and reduce around each unit. The root unit (embeddings, final norm,
// tied head) runs in two segments each way, so its parameters need not stay gathered while the
// blocks run. Activations are allocated per forward
// (tracked as ACTIVATIONS) and freed as the backward consumes them. With checkpointing, a
// block keeps only its output in forward and recomputes its internals after preBackward.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.CrossEntropyLoss;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.LayerNorm;
import org.fsdp4j.api.Linear;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;

public final class GptModel implements TrainableModel {

    /** The name of the input field that holds the tokens, (B, T) I32. */
    public static final String TOKENS = "tokens";
    /** The name of the input field that holds the next tokens, (B, T) I32. */
    public static final String TARGETS = "targets";

    /** The activations of one forward pass, released block by block during the backward. */
    private static final class Pass implements AutoCloseable {
        final Tensor tokens;               // (B, T) I32, owned by the caller
        final Tensor targets;              // (B, T) I32, owned by the caller
        final Tensor[] blockInputs;        // [L + 1] each (B, T, C): [0] the embedding, [i + 1] block i's output
        final Block.Saved[] blockSaved;    // [L]; null for a checkpointed block between forward and recompute
        Tensor lnfOut;                     // (B, T, C)
        LayerNorm.Saved lnf;               // (B·T) mean, rstd
        Tensor logits;                     // (B, T, V); becomes dlogits in backward
        Tensor losses;                     // (B·T)

        Pass(Tensor tokens, Tensor targets, int numLayers) {
            this.tokens = tokens;
            this.targets = targets;
            this.blockInputs = new Tensor[numLayers + 1];
            this.blockSaved = new Block.Saved[numLayers];
        }

        void closeHead() {
            Buffers.close(lnfOut, lnf, logits, losses);
            lnfOut = null;
            lnf = null;
            logits = null;
            losses = null;
        }

        @Override
        public void close() {
            closeHead();
            Buffers.close(blockSaved);
            Buffers.close(blockInputs);
        }
    }

    private final GptConfig config;
    private final Ops backend;
    private final boolean checkpointActivations;
    private final List<Unit> units;
    private final Embedding embedding;
    private final List<Block> blocks;
    private final LayerNorm finalNorm;
    private final Linear head;
    private Pass pass;   // the forward whose backward has not run yet, or null

    /**
     * @param checkpointActivations when true every block keeps only its output in forward and
     *                              recomputes its internals in backward
     */
    public GptModel(GptConfig config, Ops backend, boolean checkpointActivations) {
        this.config = config;
        this.backend = backend;
        this.checkpointActivations = checkpointActivations;
        int c = config.embedDim();
        List<ParamSpec> rootSpecs = new ArrayList<>();
        for (RootParam p : RootParam.values()) {
            rootSpecs.add(p.spec(config));
        }
        List<Unit> u = new ArrayList<>();
        u.add(new Unit("root", 0, rootSpecs));
        List<Block> b = new ArrayList<>();
        for (int i = 0; i < config.numLayers(); i++) {
            Block block = new Block(config, i);
            b.add(block);
            u.add(new Unit("h." + i, i + 1, block.paramSpecs()));
        }
        this.units = List.copyOf(u);
        this.blocks = List.copyOf(b);
        this.embedding = new Embedding(config.vocabSize(), config.maxSeqLen(), c);
        this.finalNorm = new LayerNorm(c);
        this.head = new Linear(c, config.vocabSize());
    }

    public GptConfig config() {
        return config;
    }

    public boolean checkpointActivations() {
        return checkpointActivations;
    }

    @Override
    public List<Unit> units() {
        return units;
    }

    /** The operations this model computes with. */
    public Ops ops() {
        return backend;
    }

    /**
     * The batch a GPT trains on: "tokens" and "targets", both (B, T) I32 row-major, where
     * targets[b, t] is the token that follows tokens[b, t].
     */
    public static Batch batch(int batchSize, int seqLen, int[] tokens, int[] targets) {
        return Batch.of(Batch.ints(TOKENS, tokens, batchSize, seqLen), Batch.ints(TARGETS, targets, batchSize, seqLen));
    }

    /** Reads inputs "tokens" and "targets" (B, T) I32 (see {@link #batch}). */
    @Override
    public void forward(Inputs inputs, UnitHooks hooks, Tensor loss) {
        forward(inputs.get(TOKENS), inputs.get(TARGETS), hooks, loss);
    }

    /** The forward pass, then the loss read back to the host: a host synchronisation (tests, evaluation). */
    public float forward(Tensor tokens, Tensor targets, UnitHooks hooks) {
        float[] out = new float[1];
        try (Tensor t = backend.allocate(DType.F32, MemoryCategory.WORKSPACE, 1)) {
            forward(tokens, targets, hooks, t);
            backend.copyToHost(t, out, 0);
        }
        return out[0];
    }

    /** Logits (B, T, V) of the last forward; valid after forward and until backward starts. */
    public Tensor logits() {
        if (pass == null || pass.logits == null) {
            throw new IllegalStateException("logits are only available between forward and backward");
        }
        return pass.logits;
    }

    /**
     * Tokens and targets (B, T) I32 with T ≤ maxSeqLen; both must stay alive until backward.
     * Activations take the parameters' dtype (see Buffers). Activations of an earlier forward that
     * had no backward are freed first.
     */
    public void forward(Tensor tokens, Tensor targets, UnitHooks hooks, Tensor loss) {
        checkBatch(tokens, targets);
        close();
        long b = tokens.dim(0);
        long t = tokens.dim(1);
        int c = config.embedDim();
        Unit root = units.get(0);
        Pass p = new Pass(tokens, targets, blocks.size());
        pass = p;

        hooks.preForward(root);                                                   // segment 1: embedding
        DType act = rootParam(RootParam.WTE).dtype();                             // the compute dtype
        p.blockInputs[0] = Buffers.activation(backend, act, b, t, c);            // (B, T, C)
        embedding.forward(backend, tokens, rootParam(RootParam.WTE), rootParam(RootParam.WPE), p.blockInputs[0]);
        hooks.postForward(root, false);
        for (int i = 0; i < blocks.size(); i++) {
            Unit unit = units.get(i + 1);
            hooks.preForward(unit);
            p.blockInputs[i + 1] = Buffers.activation(backend, act, b, t, c);    // (B, T, C)
            Block.Saved saved = blocks.get(i).forward(backend, unit, p.blockInputs[i], p.blockInputs[i + 1]);
            if (checkpointActivations) {
                saved.close();
            } else {
                p.blockSaved[i] = saved;
            }
            hooks.postForward(unit);
        }
        hooks.preForward(root);                                                   // segment 2: head
        p.lnfOut = Buffers.activation(backend, act, b, t, c);                     // (B, T, C)
        p.lnf = finalNorm.forward(backend, p.blockInputs[blocks.size()], rootParam(RootParam.LNF_WEIGHT),
                rootParam(RootParam.LNF_BIAS), p.lnfOut);
        p.logits = Buffers.activation(backend, act, b, t, config.vocabSize());    // (B, T, V)
        head.forward(backend, p.lnfOut, rootParam(RootParam.WTE), null, p.logits);
        p.losses = Buffers.statistics(backend, b * t);                            // (B·T) F32
        CrossEntropyLoss.forward(backend, p.logits, targets, p.losses, loss);
        hooks.postForward(root);
    }

    @Override
    public void backward(UnitHooks hooks, float lossScale) {
        Pass p = pass;
        if (p == null) {
            throw new IllegalStateException("backward called without a forward (or twice for one forward)");
        }
        long b = p.tokens.dim(0);
        long t = p.tokens.dim(1);
        int c = config.embedDim();
        Unit root = units.get(0);

        hooks.preBackward(root);                                                  // segment 1: head
        CrossEntropyLoss.backwardInPlace(backend, p.logits, p.targets, lossScale);
        Tensor dlogits = p.logits;                                                // (B, T, V), in place
        DType act = p.lnfOut.dtype();
        Tensor dlnf = Buffers.activation(backend, act, b, t, c);                  // (B, T, C), overwritten
        head.backward(backend, dlogits, p.lnfOut, rootParam(RootParam.WTE), dlnf, false, rootGrad(RootParam.WTE),
                null);
        Tensor dresidual = Buffers.zeroedActivation(backend, act, b, t, c);       // (B, T, C)
        finalNorm.backward(backend, p.lnf, dlnf, p.blockInputs[blocks.size()], rootParam(RootParam.LNF_WEIGHT),
                dresidual, rootGrad(RootParam.LNF_WEIGHT), rootGrad(RootParam.LNF_BIAS));
        dlnf.close();
        p.closeHead();
        hooks.postBackward(root, false);

        for (int i = blocks.size() - 1; i >= 0; i--) {
            Unit unit = units.get(i + 1);
            Block block = blocks.get(i);
            hooks.preBackward(unit);
            // block i's output has served its last reader (block i + 1's backward, or the final norm's)
            p.blockInputs[i + 1].close();
            p.blockInputs[i + 1] = null;
            Block.Saved saved = p.blockSaved[i];
            p.blockSaved[i] = null;
            if (saved == null) {
                // checkpointed: recompute from the kept input, after preBackward (re-gathered parameters)
                saved = block.forwardInternals(backend, unit, p.blockInputs[i]);
            }
            block.backward(backend, unit, saved, p.blockInputs[i], dresidual);
            saved.close();
            hooks.postBackward(unit);
        }
        hooks.preBackward(root, false);                                           // segment 2: embedding, reads no params
        embedding.backward(backend, p.tokens, dresidual, rootGrad(RootParam.WTE), rootGrad(RootParam.WPE));
        dresidual.close();
        p.close();
        pass = null;
        hooks.postBackward(root);
    }

    /** Frees the activations of a forward whose backward has not run. Idempotent. */
    @Override
    public void close() {
        if (pass != null) {
            pass.close();
            pass = null;
        }
    }

    private void checkBatch(Tensor tokens, Tensor targets) {
        if (tokens.dtype() != DType.I32 || targets.dtype() != DType.I32 || tokens.rank() != 2
                || !java.util.Arrays.equals(tokens.shape(), targets.shape())) {
            throw new IllegalArgumentException("tokens and targets must be int32 tensors of equal shape (B, T); got "
                    + tokens + " and " + targets);
        }
        if (tokens.dim(1) > config.maxSeqLen()) {
            throw new IllegalArgumentException("sequence length " + tokens.dim(1) + " exceeds the model's maxSeqLen "
                    + config.maxSeqLen() + ": use a shorter --seq-len or a model with a longer context");
        }
    }

    private Tensor rootParam(RootParam p) {
        return units.get(0).param(p.ordinal());
    }

    private Tensor rootGrad(RootParam p) {
        return units.get(0).grad(p.ordinal());
    }
}
