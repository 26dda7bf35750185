// GPT-2 (pre-LN, learned position embeddings, tied LM head) on DecoderModel's skeleton: the root
// unit holds wte, wpe and the final LayerNorm, and the head reads wte (its gradient gets
// contributions from both ends of the model); blocks are Block.
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.LayerNorm;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;

public final class GptModel extends DecoderModel<Block.Saved> {

    private final GptConfig config;
    private final Embedding embedding;
    private final List<Block> blocks;
    private final LayerNorm finalNorm;

    /**
     * @param checkpointActivations when true every block keeps only its output in forward and
     *                              recomputes its internals in backward
     */
    public GptModel(GptConfig config, Ops backend, boolean checkpointActivations) {
        super(backend, checkpointActivations, units(config), config.vocabSize(), config.maxSeqLen(), config.embedDim());
        this.config = config;
        List<Block> b = new ArrayList<>();
        for (int i = 0; i < config.numLayers(); i++) {
            b.add(new Block(config, i));
        }
        this.blocks = List.copyOf(b);
        this.embedding = new Embedding(config.vocabSize(), config.maxSeqLen(), config.embedDim());
        this.finalNorm = new LayerNorm(config.embedDim());
    }

    private static List<Unit> units(GptConfig config) {
        List<List<ParamSpec>> specs = config.unitSpecs();
        List<Unit> u = new ArrayList<>();
        u.add(new Unit("root", 0, specs.get(0)));
        for (int i = 0; i < config.numLayers(); i++) {
            u.add(new Unit("h." + i, i + 1, specs.get(i + 1)));
        }
        return u;
    }

    public GptConfig config() {
        return config;
    }

    @Override
    protected DType computeDtype() {
        return rootParam(RootParam.WTE).dtype();
    }

    @Override
    protected void embed(Tensor tokens, Tensor out) {
        embedding.forward(backend, tokens, rootParam(RootParam.WTE), rootParam(RootParam.WPE), out);
    }

    @Override
    protected void embedBackward(Tensor tokens, Tensor dout) {
        embedding.backward(backend, tokens, dout, rootGrad(RootParam.WTE), rootGrad(RootParam.WPE));
    }

    @Override
    protected int kvHeads() {
        return config.numHeads();
    }

    @Override
    protected int headDim() {
        return config.embedDim() / config.numHeads();
    }

    /** wte[token] + wpe[start + i]: the position table read from row start on. */
    @Override
    protected void embedAt(Tensor tokens, int start, Tensor out) {
        Tensor wpe = rootParam(RootParam.WPE);
        long c = config.embedDim();
        backend.embeddingForward(tokens, rootParam(RootParam.WTE),
                wpe.view(start * c, config.maxSeqLen() - start, c), out);
    }

    @Override
    protected void blockDecode(int layer, Unit unit, Tensor x, KvCache cache, int start, Tensor out) {
        blocks.get(layer).decode(backend, unit, x, cache, layer, start, out);
    }

    @Override
    protected Block.Saved blockForward(int layer, Unit unit, Tensor x, Tensor out) {
        return blocks.get(layer).forward(backend, unit, x, out);
    }

    @Override
    protected Block.Saved blockInternals(int layer, Unit unit, Tensor x) {
        return blocks.get(layer).forwardInternals(backend, unit, x);
    }

    @Override
    protected void blockBackward(int layer, Unit unit, Block.Saved saved, Tensor x, Tensor dresidual) {
        blocks.get(layer).backward(backend, unit, saved, x, dresidual);
    }

    @Override
    protected AutoCloseable finalNorm(Tensor x, Tensor out) {
        return finalNorm.forward(backend, x, rootParam(RootParam.LNF_WEIGHT), rootParam(RootParam.LNF_BIAS), out);
    }

    @Override
    protected void finalNormBackward(AutoCloseable saved, Tensor dout, Tensor x, Tensor dresidual) {
        finalNorm.backward(backend, (LayerNorm.Saved) saved, dout, x, rootParam(RootParam.LNF_WEIGHT), dresidual,
                rootGrad(RootParam.LNF_WEIGHT), rootGrad(RootParam.LNF_BIAS));
    }

    /** The tied head: wte. */
    @Override
    protected Tensor headWeight() {
        return rootParam(RootParam.WTE);
    }

    @Override
    protected Tensor headGrad() {
        return rootGrad(RootParam.WTE);
    }

    private Tensor rootParam(RootParam p) {
        return units().get(0).param(p.ordinal());
    }

    private Tensor rootGrad(RootParam p) {
        return units().get(0).grad(p.ordinal());
    }
}
