// How a user hands a model to Fsdp.shard: not an instance but a recipe, because every rank
// builds its own copy on its own device, and parameters are never allocated by the model.
package org.fsdp4j.api;

/**
 * Builds one rank's copy of the model. {@link Fsdp#shard} calls it once per rank of this
 * process, on that rank's thread, with that rank's {@link ModelContext}; every call must
 * declare the same units and parameters (the runtime checks the names and shapes).
 */
@FunctionalInterface
public interface ModelFactory {

    /**
     * Builds the model for one rank.
     *
     * @param context the rank's operations and the options a model may honour
     * @return a new model computing with {@code context.ops()}
     */
    TrainableModel create(ModelContext context);
}
