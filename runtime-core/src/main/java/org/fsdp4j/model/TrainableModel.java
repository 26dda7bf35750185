// What a trainer or the FSDP engine sees of a model: its units and a forward/backward pair
// that calls the unit hooks. It knows nothing about sharding.
package org.fsdp4j.model;

import java.util.List;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.tensor.Tensor;

public interface TrainableModel extends AutoCloseable {

    /** Units in forward order: the root unit first (index 0), then the blocks. */
    List<Unit> units();

    Backend backend();

    /**
     * Forward pass on tokens and targets (B, T) I32; returns the mean cross-entropy over all
     * B·T positions and keeps what backward needs (activations tracked as ACTIVATIONS).
     */
    float forward(Tensor tokens, Tensor targets, UnitHooks hooks);

    /**
     * Backward pass of the last forward: bound gradients += d(lossScale · meanLoss)/dθ;
     * frees the saved activations as it goes.
     */
    void backward(UnitHooks hooks, float lossScale);

    /** Frees any activations still held (e.g. after a forward without backward). */
    @Override
    void close();
}
