// A Llama-style model (LlamaConfig) on DecoderModel's skeleton: the root unit holds the token
// embedding (no position embedding: positions enter as rotary turns of q and k in every block),
// the final RMSNorm and the untied LM head; blocks are LlamaBlock. Parameter names are Hugging
// Face's (LlamaParams), so its checkpoints load by name (LlamaWeights). Each forward uploads the
// rotary tables for its length once, and every block of the pass reads them.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.model.LlamaParams.Root;

public final class LlamaModel extends DecoderModel<LlamaBlock.Saved> {

    private final LlamaConfig config;
    private final LlamaBlock block;          // stateless: every layer runs through it with its own unit
    private final RmsNorm finalNorm;
    private final RotaryTables rotary;
    private RotaryTables.Upload rope;        // this pass's tables, or null between passes

    /**
     * @param checkpointActivations when true every block keeps only its output in forward and
     *                              recomputes its internals in backward
     */
    public LlamaModel(LlamaConfig config, Ops backend, boolean checkpointActivations) {
        super(backend, checkpointActivations, units(config), config.vocabSize(), config.maxSeqLen(), config.embedDim());
        this.config = config;
        this.block = new LlamaBlock(config);
        this.finalNorm = new RmsNorm(config.embedDim(), config.normEps());
        this.rotary = new RotaryTables(config.maxSeqLen(), config.headDim(), config.ropeTheta());
    }

    private static List<Unit> units(LlamaConfig config) {
        List<List<ParamSpec>> specs = config.unitSpecs();
        List<Unit> u = new ArrayList<>();
        u.add(new Unit("root", 0, specs.get(0)));
        for (int i = 0; i < config.numLayers(); i++) {
            u.add(new Unit("layers." + i, i + 1, specs.get(i + 1)));
        }
        return u;
    }

    public LlamaConfig config() {
        return config;
    }

    @Override
    protected void beginPass(int seqLen) {
        rope = rotary.upload(backend, seqLen);
    }

    @Override
    protected void endPass() {
        if (rope != null) {
            rope.close();
            rope = null;
        }
    }

    /** The rotary tables of the decoded positions: row i turns position start + i. */
    @Override
    protected void beginDecode(int start, int count) {
        rope = rotary.upload(backend, start, count);
    }

    @Override
    protected int kvHeads() {
        return config.numKvHeads();
    }

    @Override
    protected int headDim() {
        return config.headDim();
    }

    /** No position enters the embedding: positions are the rotary turns in every block. */
    @Override
    protected void embedAt(Tensor tokens, int start, Tensor out) {
        embed(tokens, out);
    }

    @Override
    protected void blockDecode(int layer, Unit unit, Tensor x, KvCache cache, int start, Tensor out) {
        block.decode(backend, unit, x, rope, cache, layer, start, out);
    }

    @Override
    protected DType computeDtype() {
        return rootParam(Root.EMBED).dtype();
    }

    @Override
    protected void embed(Tensor tokens, Tensor out) {
        Buffers.requireShape(rootParam(Root.EMBED), "embed_tokens", config.vocabSize(), config.embedDim());
        backend.embeddingForward(tokens, rootParam(Root.EMBED), null, out);
    }

    @Override
    protected void embedBackward(Tensor tokens, Tensor dout) {
        backend.embeddingBackward(tokens, dout, rootGrad(Root.EMBED), null);
    }

    @Override
    protected LlamaBlock.Saved blockForward(int layer, Unit unit, Tensor x, Tensor out) {
        return block.forward(backend, unit, x, rope, out);
    }

    @Override
    protected LlamaBlock.Saved blockInternals(int layer, Unit unit, Tensor x) {
        return block.forwardInternals(backend, unit, x, rope);
    }

    @Override
    protected void blockBackward(int layer, Unit unit, LlamaBlock.Saved saved, Tensor x, Tensor dresidual) {
        block.backward(backend, unit, saved, x, rope, dresidual);
    }

    @Override
    protected AutoCloseable finalNorm(Tensor x, Tensor out) {
        return finalNorm.forward(backend, x, rootParam(Root.NORM), out);
    }

    @Override
    protected void finalNormBackward(AutoCloseable saved, Tensor dout, Tensor x, Tensor dresidual) {
        finalNorm.backward(backend, (Tensor) saved, dout, x, rootParam(Root.NORM), dresidual, rootGrad(Root.NORM));
    }

    /** The untied head: lm_head.weight. */
    @Override
    protected Tensor headWeight() {
        return rootParam(Root.HEAD);
    }

    @Override
    protected Tensor headGrad() {
        return rootGrad(Root.HEAD);
    }

    private Tensor rootParam(Root p) {
        return units().get(0).param(p.ordinal());
    }

    private Tensor rootGrad(Root p) {
        return units().get(0).grad(p.ordinal());
    }
}
