// The only way the outside world (the FSDP engine) takes part in a model's step: the model
// calls these around each unit's forward and backward, in execution order. The root unit's
// forward spans the whole pass (embeddings first, head last) and so does its backward.
package org.fsdp4j.model;

public interface UnitHooks {

    /** Before the unit's forward (and before a checkpointed unit's recompute: see preBackward). */
    void preForward(Unit unit);

    /** After the unit's forward has used its parameters for the last time in this pass. */
    void postForward(Unit unit);

    /** Before the unit's backward (including any recompute of its activations). */
    void preBackward(Unit unit);

    /** After the unit's backward has written all its gradients. */
    void postBackward(Unit unit);

    /** Hooks that do nothing: parameters and gradients are bound once and stay bound. */
    UnitHooks NONE = new UnitHooks() {
        @Override
        public void preForward(Unit unit) {
        }

        @Override
        public void postForward(Unit unit) {
        }

        @Override
        public void preBackward(Unit unit) {
        }

        @Override
        public void postBackward(Unit unit) {
        }
    };
}
