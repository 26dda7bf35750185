// The skeleton both built-in families share (GptModel, LlamaModel), as llm.c writes a decoder: the
// root unit's embedding (its first forward segment), the blocks in order, then the root's final
// norm, LM head and cross-entropy (its second segment); the backward in reverse, the root's head
// first and its embedding last (a segment that only writes gradients). The model owns no
// parameters: it reads them through its units' bound views and accumulates gradients into the
// bound gradient views, calling the unit hooks in execution order so the FSDP engine can gather
// and reduce around each unit (the root's two segments each way let its parameters be freed
// while the blocks run). Activations are allocated per forward (tracked as ACTIVATIONS) and freed
// as the backward consumes them; with checkpointing a block keeps only its output in forward and
// recomputes its internals after preBackward. A family supplies the embedding, the blocks and the
// final norm; S is what one of its blocks saves for the backward. Both families read the same
// inputs, "tokens" and "targets" (batch() makes them), through the API's TrainableModel contract.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.CrossEntropyLoss;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.Linear;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;

public abstract class DecoderModel<S extends AutoCloseable> implements TrainableModel {

    /** The name of the input field that holds the tokens, (B, T) I32. */
    public static final String TOKENS = "tokens";
    /** The name of the input field that holds the next tokens, (B, T) I32. */
    public static final String TARGETS = "targets";

    /** The activations of one forward pass, released block by block during the backward. */
    private final class Pass implements AutoCloseable {
        final Tensor tokens;               // (B, T) I32, owned by the caller
        final Tensor targets;              // (B, T) I32, owned by the caller
        final Tensor[] blockInputs;        // [L + 1] each (B, T, C): [0] the embedding, [i + 1] block i's output
        final List<S> blockSaved;          // [L]; null for a checkpointed block between forward and recompute
        Tensor normOut;                    // (B, T, C) the final norm's output
        AutoCloseable norm;                // the final norm's saved statistics
        Tensor logits;                     // (B, T, V); becomes dlogits in backward
        Tensor losses;                     // (B·T)

        Pass(Tensor tokens, Tensor targets, int numLayers) {
            this.tokens = tokens;
            this.targets = targets;
            this.blockInputs = new Tensor[numLayers + 1];
            this.blockSaved = new ArrayList<>(java.util.Collections.nCopies(numLayers, null));
        }

        void closeHead() {
            Buffers.close(normOut, norm, logits, losses);
            normOut = null;
            norm = null;
            logits = null;
            losses = null;
        }

        @Override
        public void close() {
            closeHead();
            Buffers.close(blockSaved.toArray(AutoCloseable[]::new));
            Buffers.close(blockInputs);
            endPass();
        }
    }

    protected final Ops backend;
    private final boolean checkpointActivations;
    private final List<Unit> units;
    private final int vocabSize;
    private final int maxSeqLen;
    private final int embedDim;
    private final Linear head;
    private Pass pass;   // the forward whose backward has not run yet, or null

    /** {@code units}: the root (index 0), then one per block in forward order. */
    DecoderModel(Ops backend, boolean checkpointActivations, List<Unit> units, int vocabSize, int maxSeqLen,
                 int embedDim) {
        this.backend = backend;
        this.checkpointActivations = checkpointActivations;
        this.units = List.copyOf(units);
        this.vocabSize = vocabSize;
        this.maxSeqLen = maxSeqLen;
        this.embedDim = embedDim;
        this.head = new Linear(embedDim, vocabSize);
    }

    // ------------------------------------------------------------------ what a family supplies

    /** The compute dtype: the token embedding table's (every activation takes it, see Buffers). */
    protected abstract DType computeDtype();

    /** Root segment 1: out (B, T, C) = the embedding of tokens (B, T). */
    protected abstract void embed(Tensor tokens, Tensor out);

    /** Root segment 2's backward end: the embedding's gradients from dout (B, T, C); reads no parameters. */
    protected abstract void embedBackward(Tensor tokens, Tensor dout);

    /** Block {@code layer}: out = block(x); returns what its backward needs. */
    protected abstract S blockForward(int layer, Unit unit, Tensor x, Tensor out);

    /** Block {@code layer}'s internals recomputed from x (checkpointing), bit-identical to what blockForward saved. */
    protected abstract S blockInternals(int layer, Unit unit, Tensor x);

    /** Block {@code layer}'s backward: dresidual holds d(out) on entry and d(x) on return. */
    protected abstract void blockBackward(int layer, Unit unit, S saved, Tensor x, Tensor dresidual);

    /** out = the final norm of x, with the root's parameters; returns its saved statistics. */
    protected abstract AutoCloseable finalNorm(Tensor x, Tensor out);

    /** Accumulates the final norm's input gradient into dresidual and its parameters' gradients. */
    protected abstract void finalNormBackward(AutoCloseable saved, Tensor dout, Tensor x, Tensor dresidual);

    /** The LM head's weight (V, C) in the root unit, and its gradient. */
    protected abstract Tensor headWeight();

    protected abstract Tensor headGrad();

    // ------------------------------------------------------------------ what a family supplies for decoding

    /** Key/value heads per block (Hkv; the query heads for multi-head attention). */
    protected abstract int kvHeads();

    /** Width of one attention head (D). */
    protected abstract int headDim();

    /** out (1, Tn, C) = the embedding of tokens (1, Tn) sitting at positions start .. start + Tn − 1. */
    protected abstract void embedAt(Tensor tokens, int start, Tensor out);

    /**
     * Block {@code layer}'s forward of x (1, Tn, C) at positions start .. start + Tn − 1 into out,
     * its attention reading and extending {@code cache} (KvCache.attend); keeps nothing.
     */
    protected abstract void blockDecode(int layer, Unit unit, Tensor x, KvCache cache, int start, Tensor out);

    /** What every block of one decode call shares (the Llama's rotary tables for its positions). */
    protected void beginDecode(int start, int count) {
    }

    /** Resources every block of one pass shares (e.g. rotary tables for T positions), made at its start. */
    protected void beginPass(int seqLen) {
    }

    /** Frees what beginPass made; idempotent. */
    protected void endPass() {
    }

    // ------------------------------------------------------------------ the model

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
     * The batch a decoder trains on: "tokens" and "targets", both (B, T) I32 row-major, where
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
        int layers = units.size() - 1;
        Unit root = units.get(0);
        Pass p = new Pass(tokens, targets, layers);
        pass = p;
        beginPass(Math.toIntExact(t));

        hooks.preForward(root);                                                   // segment 1: embedding
        DType act = computeDtype();
        p.blockInputs[0] = Buffers.activation(backend, act, b, t, embedDim);     // (B, T, C)
        embed(tokens, p.blockInputs[0]);
        hooks.postForward(root, false);
        for (int i = 0; i < layers; i++) {
            Unit unit = units.get(i + 1);
            hooks.preForward(unit);
            p.blockInputs[i + 1] = Buffers.activation(backend, act, b, t, embedDim);   // (B, T, C)
            S saved = blockForward(i, unit, p.blockInputs[i], p.blockInputs[i + 1]);
            if (checkpointActivations) {
                Buffers.close(saved);
            } else {
                p.blockSaved.set(i, saved);
            }
            hooks.postForward(unit);
        }
        hooks.preForward(root);                                                   // segment 2: head
        p.normOut = Buffers.activation(backend, act, b, t, embedDim);            // (B, T, C)
        p.norm = finalNorm(p.blockInputs[layers], p.normOut);
        p.logits = Buffers.activation(backend, act, b, t, vocabSize);            // (B, T, V)
        head.forward(backend, p.normOut, headWeight(), null, p.logits);
        p.losses = Buffers.statistics(backend, b * t);                           // (B·T) F32
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
        int layers = units.size() - 1;
        Unit root = units.get(0);

        hooks.preBackward(root);                                                  // segment 1: head
        CrossEntropyLoss.backwardInPlace(backend, p.logits, p.targets, lossScale);
        Tensor dlogits = p.logits;                                                // (B, T, V), in place
        DType act = p.normOut.dtype();
        Tensor dnorm = Buffers.activation(backend, act, b, t, embedDim);          // (B, T, C), overwritten
        head.backward(backend, dlogits, p.normOut, headWeight(), dnorm, false, headGrad(), null);
        Tensor dresidual = Buffers.zeroedActivation(backend, act, b, t, embedDim);   // (B, T, C)
        finalNormBackward(p.norm, dnorm, p.blockInputs[layers], dresidual);
        dnorm.close();
        p.closeHead();
        hooks.postBackward(root, false);

        for (int i = layers - 1; i >= 0; i--) {
            Unit unit = units.get(i + 1);
            hooks.preBackward(unit);
            // block i's output has served its last reader (block i + 1's backward, or the final norm's)
            p.blockInputs[i + 1].close();
            p.blockInputs[i + 1] = null;
            S saved = p.blockSaved.get(i);
            p.blockSaved.set(i, null);
            if (saved == null) {
                // checkpointed: recompute from the kept input, after preBackward (re-gathered parameters)
                saved = blockInternals(i, unit, p.blockInputs[i]);
            }
            blockBackward(i, unit, saved, p.blockInputs[i], dresidual);
            Buffers.close(saved);
            hooks.postBackward(unit);
        }
        hooks.preBackward(root, false);                                           // segment 2: embedding, reads no params
        embedBackward(p.tokens, dresidual);
        dresidual.close();
        p.close();
        pass = null;
        hooks.postBackward(root);
    }

    // ------------------------------------------------------------------ decoding with a KV cache

    /**
     * An empty KV cache for one sequence of up to {@code capacity} positions (at most the model's
     * context), in the compute dtype on this model's device; the caller closes it.
     */
    public KvCache newKvCache(int capacity) {
        if (capacity < 1 || capacity > maxSeqLen) {
            throw new IllegalArgumentException("a KV cache holds 1 to " + maxSeqLen + " positions (the model's context),"
                    + " not " + capacity);
        }
        return new KvCache(backend, computeDtype(), units.size() - 1, kvHeads(), headDim(), capacity);
    }

    /** The longest sequence the model takes (its context). */
    public int maxSeqLen() {
        return maxSeqLen;
    }

    /** The vocabulary's size (V, the logits' width). */
    public int vocabSize() {
        return vocabSize;
    }

    /**
     * Runs {@code tokens} at the cache's next positions (a prompt's prefill, or one generated token)
     * and returns their logits on the host, (Tn, V) row-major: row i is what a full forward over
     * every token so far gives at position cache.length() + i. Each block attends over the cached
     * keys and values of the earlier positions and appends the new ones. Needs the parameters bound
     * (a single device holding the whole model; no unit hooks run); frees any forward's activations
     * whose backward has not run. Reads the logits back: one host synchronisation.
     */
    public float[] decode(KvCache cache, int[] tokens) {
        int n = tokens.length;
        int start = cache.length();
        if (n == 0) {
            throw new IllegalArgumentException("decode needs at least one token");
        }
        if (start + n > cache.capacity()) {
            throw new IllegalArgumentException("decoding " + n + " tokens at position " + start + " passes the KV cache's "
                    + cache.capacity() + " positions (the model's context is " + maxSeqLen + ")");
        }
        close();
        int layers = units.size() - 1;
        DType act = computeDtype();
        Tensor tok = backend.allocate(DType.I32, org.fsdp4j.api.MemoryCategory.ACTIVATIONS, 1, n);   // (1, Tn)
        Tensor x = null;
        Tensor normOut = null;
        AutoCloseable norm = null;
        Tensor logits = null;
        try {
            backend.copyFromHost(tokens, 0, tok);
            beginDecode(start, n);
            x = Buffers.activation(backend, act, 1, n, embedDim);                  // (1, Tn, C)
            embedAt(tok, start, x);
            for (int i = 0; i < layers; i++) {
                Tensor out = Buffers.activation(backend, act, 1, n, embedDim);      // (1, Tn, C)
                try {
                    blockDecode(i, units.get(i + 1), x, cache, start, out);
                } catch (RuntimeException e) {
                    out.close();
                    throw e;
                }
                x.close();
                x = out;
            }
            normOut = Buffers.activation(backend, act, 1, n, embedDim);             // (1, Tn, C)
            norm = finalNorm(x, normOut);
            logits = Buffers.activation(backend, act, 1, n, vocabSize);             // (1, Tn, V)
            head.forward(backend, normOut, headWeight(), null, logits);
            float[] host = backend.toHost(logits);
            cache.advance(n);
            return host;
        } finally {
            Buffers.close(tok, x, normOut, norm, logits);
            endPass();
        }
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
        if (tokens.dim(1) > maxSeqLen) {
            throw new IllegalArgumentException("sequence length " + tokens.dim(1) + " exceeds the model's maxSeqLen "
                    + maxSeqLen + ": use a shorter --seq-len or a model with a longer context");
        }
    }
}
