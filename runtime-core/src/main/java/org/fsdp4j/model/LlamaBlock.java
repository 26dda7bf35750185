// One Llama block: h = x + attn(rmsnorm1(x)), out = h + mlp(rmsnorm2(h)), in GPT's Block form: it
// reads its parameters through unit.param, accumulates into unit.grad, and the residual stream's
// gradient flows through one buffer that backward updates in place.
package org.fsdp4j.model;

import org.fsdp4j.api.Ops;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Unit;
import org.fsdp4j.model.LlamaParams.Block;

final class LlamaBlock {

    /** Everything the backward needs besides the block's input; dropped and rebuilt under checkpointing. */
    static final class Saved implements AutoCloseable {
        final Tensor norm1Out;                    // (B, T, C)
        final Tensor rstd1;                       // (B·T) F32
        final GroupedQueryAttention.Saved attn;
        final Tensor residual;                    // (B, T, C) x + attn(rmsnorm1(x)), the input of rmsnorm2
        final Tensor norm2Out;                    // (B, T, C)
        final Tensor rstd2;                       // (B·T) F32
        final SwiGluMlp.Saved mlp;

        private Saved(Tensor norm1Out, Tensor rstd1, GroupedQueryAttention.Saved attn, Tensor residual,
                      Tensor norm2Out, Tensor rstd2, SwiGluMlp.Saved mlp) {
            this.norm1Out = norm1Out;
            this.rstd1 = rstd1;
            this.attn = attn;
            this.residual = residual;
            this.norm2Out = norm2Out;
            this.rstd2 = rstd2;
            this.mlp = mlp;
        }

        @Override
        public void close() {
            Buffers.close(norm1Out, rstd1, attn, residual, norm2Out, rstd2, mlp);
        }
    }

    private final int embedDim;
    private final RmsNorm norm;
    private final GroupedQueryAttention attention;
    private final SwiGluMlp mlp;

    LlamaBlock(LlamaConfig cfg) {
        this.embedDim = cfg.embedDim();
        this.norm = new RmsNorm(embedDim, cfg.normEps());
        this.attention = new GroupedQueryAttention(cfg);
        this.mlp = new SwiGluMlp(embedDim, cfg.hiddenDim());
    }

    /** out (B, T, C) = block(x (B, T, C)); returns what backward needs. out must not alias x. */
    Saved forward(Ops backend, Unit unit, Tensor x, RotaryTables.Upload rope, Tensor out) {
        Saved saved = forwardInternals(backend, unit, x, rope);
        mlp.project(backend, saved.mlp, p(unit, Block.DOWN), out);
        backend.add(saved.residual, out, out);
        return saved;
    }

    /**
     * out (1, Tn, C) = block(x (1, Tn, C)) for tokens at positions start .. start + Tn − 1 (rope:
     * their rotary tables), the attention over layer {@code layer}'s KV cache; keeps nothing.
     */
    void decode(Ops backend, Unit unit, Tensor x, RotaryTables.Upload rope, KvCache cache, int layer, int start,
                Tensor out) {
        long b = x.dim(0);
        long t = x.dim(1);
        Tensor norm1Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);      // (1, Tn, C)
        Tensor residual = Buffers.activation(backend, x.dtype(), b, t, embedDim);      // (1, Tn, C)
        Tensor norm2Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);      // (1, Tn, C)
        Tensor rstd1 = null;
        Tensor rstd2 = null;
        SwiGluMlp.Saved hidden = null;
        try {
            rstd1 = norm.forward(backend, x, p(unit, Block.INPUT_NORM), norm1Out);
            attention.decode(backend, norm1Out, p(unit, Block.Q), p(unit, Block.K), p(unit, Block.V), p(unit, Block.O),
                    rope, cache, layer, start, residual);
            backend.add(x, residual, residual);
            rstd2 = norm.forward(backend, residual, p(unit, Block.POST_NORM), norm2Out);
            hidden = mlp.hidden(backend, norm2Out, p(unit, Block.GATE), p(unit, Block.UP));
            mlp.project(backend, hidden, p(unit, Block.DOWN), out);
            backend.add(residual, out, out);
        } finally {
            Buffers.close(norm1Out, rstd1, residual, norm2Out, rstd2, hidden);
        }
    }

    /**
     * The forward up to what backward needs, without the block's output: a checkpointed block's
     * recompute, which skips the MLP's down projection. Bit-identical to the internals forward saves.
     */
    Saved forwardInternals(Ops backend, Unit unit, Tensor x, RotaryTables.Upload rope) {
        long b = x.dim(0);
        long t = x.dim(1);
        Tensor norm1Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);      // (B, T, C)
        Tensor rstd1 = norm.forward(backend, x, p(unit, Block.INPUT_NORM), norm1Out);
        Tensor residual = Buffers.activation(backend, x.dtype(), b, t, embedDim);      // (B, T, C)
        GroupedQueryAttention.Saved attn = attention.forward(backend, norm1Out, p(unit, Block.Q), p(unit, Block.K),
                p(unit, Block.V), p(unit, Block.O), rope, residual);
        backend.add(x, residual, residual);
        Tensor norm2Out = Buffers.activation(backend, x.dtype(), b, t, embedDim);      // (B, T, C)
        Tensor rstd2 = norm.forward(backend, residual, p(unit, Block.POST_NORM), norm2Out);
        SwiGluMlp.Saved mlpSaved = mlp.hidden(backend, norm2Out, p(unit, Block.GATE), p(unit, Block.UP));
        return new Saved(norm1Out, rstd1, attn, residual, norm2Out, rstd2, mlpSaved);
    }

    /**
     * Backward of the block whose input was x. On entry dresidual (B, T, C) holds d(out); on return
     * it holds d(x). Parameter gradients are accumulated into the unit's gradient views.
     */
    void backward(Ops backend, Unit unit, Saved saved, Tensor x, RotaryTables.Upload rope, Tensor dresidual) {
        long b = x.dim(0);
        long t = x.dim(1);
        // MLP branch: d(out) flows into rmsnorm2's output, and straight through to the residual
        Tensor dnorm2 = Buffers.activation(backend, x.dtype(), b, t, embedDim);        // (B, T, C), overwritten
        mlp.backward(backend, saved.mlp, saved.norm2Out, dresidual, dnorm2, p(unit, Block.GATE), p(unit, Block.UP),
                p(unit, Block.DOWN), g(unit, Block.GATE), g(unit, Block.UP), g(unit, Block.DOWN));
        norm.backward(backend, saved.rstd2, dnorm2, saved.residual, p(unit, Block.POST_NORM), dresidual,
                g(unit, Block.POST_NORM));
        dnorm2.close();
        // dresidual now holds d(residual); the attention branch adds its share of d(x)
        Tensor dnorm1 = Buffers.activation(backend, x.dtype(), b, t, embedDim);        // (B, T, C), overwritten
        attention.backward(backend, saved.attn, saved.norm1Out, dresidual, dnorm1, p(unit, Block.Q), p(unit, Block.K),
                p(unit, Block.V), p(unit, Block.O), g(unit, Block.Q), g(unit, Block.K), g(unit, Block.V),
                g(unit, Block.O), rope);
        norm.backward(backend, saved.rstd1, dnorm1, x, p(unit, Block.INPUT_NORM), dresidual, g(unit, Block.INPUT_NORM));
        dnorm1.close();
    }

    private static Tensor p(Unit unit, Block param) {
        return unit.param(param.ordinal());
    }

    private static Tensor g(Unit unit, Block param) {
        return unit.grad(param.ordinal());
    }
}
