// The only way the outside world (the FSDP engine) takes part in a model's step: the model
// calls these around each unit's forward and backward, in execution order.
//
// A unit's forward or backward may come in segments, each bracketed by its own pre/post call;
// between two segments the unit's parameters are not read, so the engine may free them. The
// GPT root is the case that needs it: its forward is the embedding (first) and the head (last),
// its backward the head (first) and the embedding (last), and the embedding's backward only
// writes gradients. Blocks have one segment each way. A model that never splits a unit calls
// the one-argument forms, which mean "one segment, the last".
package org.fsdp4j.api;

public interface UnitHooks {

    /** Before each forward segment of the unit (a checkpointed unit's recompute runs after preBackward, not here). */
    void preForward(Unit unit);

    /**
     * After a forward segment has used the unit's parameters for the last time in that segment;
     * {@code last} is true after the unit's final forward segment of the pass.
     */
    void postForward(Unit unit, boolean last);

    /**
     * Before a backward segment of the unit (including any recompute of its activations). The
     * unit's gradients are bound from here to the matching postBackward and accumulate across
     * its segments; {@code readsParams} false means the segment only writes gradients (an
     * embedding's backward), so its parameters need not be present.
     */
    void preBackward(Unit unit, boolean readsParams);

    /**
     * After a backward segment has written its gradients; {@code last} is true after the unit's
     * final backward segment of the pass (its gradient for this pass is then complete).
     */
    void postBackward(Unit unit, boolean last);

    /** The unit's only forward segment ends. */
    default void postForward(Unit unit) {
        postForward(unit, true);
    }

    /** The unit's only backward segment begins; it reads the parameters. */
    default void preBackward(Unit unit) {
        preBackward(unit, true);
    }

    /** The unit's only backward segment ends. */
    default void postBackward(Unit unit) {
        postBackward(unit, true);
    }

    /** Hooks that do nothing: parameters and gradients are bound once and stay bound. */
    UnitHooks NONE = new UnitHooks() {
        @Override
        public void preForward(Unit unit) {
        }

        @Override
        public void postForward(Unit unit, boolean last) {
        }

        @Override
        public void preBackward(Unit unit, boolean readsParams) {
        }

        @Override
        public void postBackward(Unit unit, boolean last) {
        }
    };
}
