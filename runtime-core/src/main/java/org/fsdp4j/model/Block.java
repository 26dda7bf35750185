// One pre-LN transformer block: x + attn(ln1(x)), then + mlp(ln2(·)). Its parameters are one
// unit's; it reads them through unit.param and accumulates into unit.grad. The residual stream's
// gradient flows through one buffer that backward updates in place (llm.c's dresidual).
package org.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.LayerNorm;
import org.fsdp4j.api.Linear;
import org.fsdp4j.api.Ops;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;

final class Block {

    /** Everything the backward needs besides the block's input; dropped and rebuilt under checkpointing. */
    static final class Saved implements AutoCloseable {
        final Tensor ln1Out;                    // (B, T, C)
        final LayerNorm.Saved ln1;              // (B·T) mean, rstd
        final CausalSelfAttention.Saved attn;
        final Tensor residual;                  // (B, T, C) x + attn(ln1(x)), the input of ln2
        final Tensor ln2Out;                    // (B, T, C)
        final LayerNorm.Saved ln2;              // (B·T) mean, rstd
        final Mlp.Saved mlp;

        private Saved(Tensor ln1Out, LayerNorm.Saved ln1, CausalSelfAttention.Saved attn, Tensor residual,
                      Tensor ln2Out, LayerNorm.Saved ln2, Mlp.Saved mlp) {
            this.ln1Out = ln1Out;
            this.ln1 = ln1;
            this.attn = attn;
            this.residual = residual;
            this.ln2Out = ln2Out;
            this.ln2 = ln2;
            this.mlp = mlp;
        }

        @Override
        public void close() {
            Buffers.close(ln1Out, ln1, attn, residual, ln2Out, ln2, mlp);
        }
    }

    private final int embedDim;
    private final List<ParamSpec> specs;
    private final LayerNorm norm;
    private final CausalSelfAttention attention;
    private final Mlp mlp;

    Block(GptConfig cfg, int layer) {
        this.embedDim = cfg.embedDim();
        List<ParamSpec> s = new ArrayList<>();
        for (BlockParam p : BlockParam.values()) {
            s.add(p.spec(cfg, layer));
        }
        this.specs = List.copyOf(s);
        this.norm = new LayerNorm(embedDim);
        this.attention = new CausalSelfAttention(embedDim, cfg.numHeads());
        this.mlp = new Mlp(embedDim);
    }

    /** The block's parameters in unit order (BlockParam order). */
    List<ParamSpec> paramSpecs() {
        return specs;
    }

    /** out (B, T, C) = block(x (B, T, C)); returns what backward needs. out must not alias x. */
    Saved forward(Ops backend, Unit unit, Tensor x, Tensor out) {
        Saved saved = forwardInternals(backend, unit, x);
        mlp.project(backend, saved.mlp, p(unit, BlockParam.MLP_PROJ_WEIGHT), p(unit, BlockParam.MLP_PROJ_BIAS), out);
        backend.add(saved.residual, out, out);
        return saved;
    }

    /**
     * The forward up to what backward needs, without the block's output: a checkpointed block's
     * recompute, which skips the MLP's output projection (a third of the block's Linear FLOPs).
     * Bit-identical to the internals {@link #forward} saves.
     */
    Saved forwardInternals(Ops backend, Unit unit, Tensor x) {
        long b = x.dim(0);
        long t = x.dim(1);
        Tensor ln1Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);       // (B, T, C)
        LayerNorm.Saved ln1 = norm.forward(backend, x, p(unit, BlockParam.LN1_WEIGHT),
                p(unit, BlockParam.LN1_BIAS), ln1Out);
        Tensor residual = Buffers.activation(backend, x.dtype(), b, t, embedDim);     // (B, T, C)
        CausalSelfAttention.Saved attn = attention.forward(backend, ln1Out, p(unit, BlockParam.QKV_WEIGHT),
                p(unit, BlockParam.QKV_BIAS), p(unit, BlockParam.ATTN_PROJ_WEIGHT),
                p(unit, BlockParam.ATTN_PROJ_BIAS), residual);
        backend.add(x, residual, residual);
        Tensor ln2Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);       // (B, T, C)
        LayerNorm.Saved ln2 = norm.forward(backend, residual, p(unit, BlockParam.LN2_WEIGHT),
                p(unit, BlockParam.LN2_BIAS), ln2Out);
        Mlp.Saved mlpSaved = mlp.hidden(backend, ln2Out, p(unit, BlockParam.FC_WEIGHT), p(unit, BlockParam.FC_BIAS));
        return new Saved(ln1Out, ln1, attn, residual, ln2Out, ln2, mlpSaved);
    }

    /**
     * out (1, Tn, C) = block(x (1, Tn, C)) for tokens at positions start .. start + Tn − 1, the
     * attention over layer {@code layer}'s KV cache (extended by these positions); keeps nothing.
     */
    void decode(Ops backend, Unit unit, Tensor x, KvCache cache, int layer, int start, Tensor out) {
        long b = x.dim(0);
        long t = x.dim(1);
        Tensor ln1Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);       // (1, Tn, C)
        Tensor residual = Buffers.activation(backend, x.dtype(), b, t, embedDim);     // (1, Tn, C)
        Tensor ln2Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);       // (1, Tn, C)
        LayerNorm.Saved ln1 = null;
        LayerNorm.Saved ln2 = null;
        Mlp.Saved hidden = null;
        try {
            ln1 = norm.forward(backend, x, p(unit, BlockParam.LN1_WEIGHT), p(unit, BlockParam.LN1_BIAS), ln1Out);
            attention.decode(backend, ln1Out, p(unit, BlockParam.QKV_WEIGHT), p(unit, BlockParam.QKV_BIAS),
                    p(unit, BlockParam.ATTN_PROJ_WEIGHT), p(unit, BlockParam.ATTN_PROJ_BIAS), cache, layer, start,
                    residual);
            backend.add(x, residual, residual);
            ln2 = norm.forward(backend, residual, p(unit, BlockParam.LN2_WEIGHT), p(unit, BlockParam.LN2_BIAS), ln2Out);
            hidden = mlp.hidden(backend, ln2Out, p(unit, BlockParam.FC_WEIGHT), p(unit, BlockParam.FC_BIAS));
            mlp.project(backend, hidden, p(unit, BlockParam.MLP_PROJ_WEIGHT), p(unit, BlockParam.MLP_PROJ_BIAS), out);
            backend.add(residual, out, out);
        } finally {
            Buffers.close(ln1Out, ln1, residual, ln2Out, ln2, hidden);
        }
    }

    /**
     * Backward of the block whose input was x. On entry dresidual (B, T, C) holds d(out); on return
     * it holds d(x). Parameter gradients are accumulated into the unit's gradient views.
     */
    void backward(Ops backend, Unit unit, Saved saved, Tensor x, Tensor dresidual) {
        long b = x.dim(0);
        long t = x.dim(1);
        // MLP branch: d(out) flows into ln2's output, and straight through to the residual
        Tensor dln2 = Buffers.activation(backend, x.dtype(), b, t, embedDim);         // (B, T, C), overwritten
        mlp.backward(backend, saved.mlp, saved.ln2Out, dresidual, dln2, p(unit, BlockParam.FC_WEIGHT),
                p(unit, BlockParam.MLP_PROJ_WEIGHT), g(unit, BlockParam.FC_WEIGHT), g(unit, BlockParam.FC_BIAS),
                g(unit, BlockParam.MLP_PROJ_WEIGHT), g(unit, BlockParam.MLP_PROJ_BIAS));
        norm.backward(backend, saved.ln2, dln2, saved.residual, p(unit, BlockParam.LN2_WEIGHT), dresidual,
                g(unit, BlockParam.LN2_WEIGHT), g(unit, BlockParam.LN2_BIAS));
        dln2.close();
        // dresidual now holds d(residual); the attention branch adds its share of d(x)
        Tensor dln1 = Buffers.activation(backend, x.dtype(), b, t, embedDim);         // (B, T, C), overwritten
        attention.backward(backend, saved.attn, saved.ln1Out, dresidual, dln1, p(unit, BlockParam.QKV_WEIGHT),
                p(unit, BlockParam.ATTN_PROJ_WEIGHT), g(unit, BlockParam.QKV_WEIGHT), g(unit, BlockParam.QKV_BIAS),
                g(unit, BlockParam.ATTN_PROJ_WEIGHT), g(unit, BlockParam.ATTN_PROJ_BIAS));
        norm.backward(backend, saved.ln1, dln1, x, p(unit, BlockParam.LN1_WEIGHT), dresidual,
                g(unit, BlockParam.LN1_WEIGHT), g(unit, BlockParam.LN1_BIAS));
        dln1.close();
    }

    private static Tensor p(Unit unit, BlockParam param) {
        return unit.param(param.ordinal());
    }

    private static Tensor g(Unit unit, BlockParam param) {
        return unit.grad(param.ordinal());
    }
}
