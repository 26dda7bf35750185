// A built-in decoder model (GPT or Llama) that copies its logits to the host after each forward,
// so the weight-loading tests can compare a sharded model's logits with PyTorch's. The copy is a
// host synchronisation: tests only.
package org.fsdp4j.weights;

import java.util.List;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;
import org.fsdp4j.model.DecoderModel;

final class LogitsTap implements TrainableModel {

    private final DecoderModel<?> inner;
    /** (B/N, T, V) of this rank, from the last forward. */
    float[] logits;

    LogitsTap(DecoderModel<?> inner) {
        this.inner = inner;
    }

    @Override
    public List<Unit> units() {
        return inner.units();
    }

    @Override
    public void forward(Inputs inputs, UnitHooks hooks, Tensor loss) {
        inner.forward(inputs, hooks, loss);
        logits = inner.ops().toHost(inner.logits());
    }

    @Override
    public void backward(UnitHooks hooks, float lossScale) {
        inner.backward(hooks, lossScale);
    }

    @Override
    public void close() {
        inner.close();
    }
}
