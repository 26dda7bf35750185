// The contract a model implements to be trained by fsdp4j: its parameters declared unit by unit,
// and a forward/backward pair that computes with Ops and calls the unit hooks around each unit.
// It knows nothing about sharding: the runtime's hooks gather, free and reduce around it.
package org.fsdp4j.api;

import java.util.List;

/**
 * A model fsdp4j can shard and train: GPT, Llama, or yours.
 *
 * <p>A model declares its parameters ({@link ParamSpec}: name, shape, initialiser, weight decay)
 * grouped into {@link Unit}s (FSDP's unit of gathering, typically the embeddings-and-head root
 * and one unit per block) and never allocates them: the runtime binds each unit's parameter and
 * gradient tensors before the unit runs and unbinds them after. Forward and backward compute
 * with the {@link Ops} the model was built with and call the {@link UnitHooks} around each
 * unit, in execution order:
 *
 * <pre>{@code
 * hooks.preForward(unit);   ... read unit.param(i) ...   hooks.postForward(unit);
 * hooks.preBackward(unit);  ... unit.grad(i) += ...     hooks.postBackward(unit);
 * }</pre>
 *
 * <p>Every rank builds its own instance (see {@link ModelFactory}); the runtime calls forward,
 * then backward, once per micro-batch, on the rank's thread.
 */
public interface TrainableModel extends AutoCloseable {

    /**
     * The units, unit {@code i} at position {@code i}, in the order their forward runs.
     *
     * @return the model's units; the same list every call
     */
    List<Unit> units();

    /**
     * The forward pass on one micro-batch: computes the mean loss over the micro-batch's samples
     * into {@code loss} (one F32 element) without reading it back (the runtime reads it once per
     * step), and keeps what backward needs.
     *
     * @param inputs the micro-batch, on the model's device (the batch's fields by name)
     * @param hooks  called around each unit, as the class comment shows
     * @param loss   one F32 element to write the micro-batch's mean loss into (overwritten)
     */
    void forward(Inputs inputs, UnitHooks hooks, Tensor loss);

    /**
     * The backward pass of the last forward: every unit's bound gradients
     * {@code += d(lossScale · loss)/dθ}; frees the saved activations as it goes.
     *
     * @param hooks     called around each unit, in backward order
     * @param lossScale the factor the loss is multiplied by before differentiating (mixed precision
     *                  scaling, averaging over micro-batches)
     */
    void backward(UnitHooks hooks, float lossScale);

    /** Frees any activations still held (after a forward without backward); idempotent. */
    @Override
    void close();
}
