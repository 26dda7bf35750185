// What a trainer or the FSDP engine sees of a model: its units and a forward/backward pair
// that calls the unit hooks. It knows nothing about sharding.
package org.fsdp4j.model;

import java.util.List;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.Tensor;

public interface TrainableModel extends AutoCloseable {

    /** Units in forward order: the root unit first (index 0), then the blocks. */
    List<Unit> units();

    Backend backend();

    /**
     * Forward pass on tokens and targets (B, T) I32: writes the mean cross-entropy over all B·T
     * positions into {@code loss} (one F32 element) on the backend's current stream, without
     * reading it (the caller reads it when it must), and keeps what backward needs (activations
     * tracked as ACTIVATIONS).
     */
    void forward(Tensor tokens, Tensor targets, UnitHooks hooks, Tensor loss);

    /** The forward pass, then the loss read back to the host: a host synchronisation (tests, evaluation). */
    default float forward(Tensor tokens, Tensor targets, UnitHooks hooks) {
        float[] loss = new float[1];
        try (Tensor t = backend().allocate(DType.F32, MemoryCategory.WORKSPACE, 1)) {
            forward(tokens, targets, hooks, t);
            backend().copyToHost(t, loss, 0);
        }
        return loss[0];
    }

    /**
     * Backward pass of the last forward: bound gradients += d(lossScale · meanLoss)/dθ;
     * frees the saved activations as it goes.
     */
    void backward(UnitHooks hooks, float lossScale);

    /** Frees any activations still held (e.g. after a forward without backward). */
    @Override
    void close();
}
