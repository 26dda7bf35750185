// What a model is given when a rank builds it: the Ops of its device and the options that
// change how a model computes (activation checkpointing, the compute dtype). Nothing else
// about the run is a model's business.
package org.fsdp4j.api;

/**
 * What a rank gives its model when it builds it.
 *
 * @param ops                     the operations of the rank's device; the model computes with these only
 * @param rank                    the rank building it (0 .. worldSize-1), for logging; models must not branch on it
 * @param worldSize               ranks in the run
 * @param computeDtype            the dtype parameters are gathered in, and so the dtype activations take
 * @param activationCheckpointing true when the user asked models to recompute block internals in
 *                                backward instead of keeping them (a model that cannot ignores it)
 */
public record ModelContext(Ops ops, int rank, int worldSize, DType computeDtype, boolean activationCheckpointing) {

    /**
     * Checks the values.
     *
     * @param ops                     the operations of the rank's device; the model computes with
     *                                these only
     * @param rank                    the rank building it (0 .. worldSize-1), for logging; models
     *                                must not branch on it
     * @param worldSize               ranks in the run
     * @param computeDtype            the dtype parameters are gathered in, and so the dtype
     *                                activations take
     * @param activationCheckpointing true when the user asked models to recompute block internals
     *                                in backward instead of keeping them (a model that cannot
     *                                ignores it)
     * @throws IllegalArgumentException if ops is missing or the rank is outside the world
     */
    public ModelContext {
        if (ops == null || computeDtype == null) {
            throw new IllegalArgumentException("a model context needs ops and a compute dtype");
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank " + rank + " is outside a world of " + worldSize);
        }
    }
}
