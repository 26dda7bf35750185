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

/**
 * What a model calls around each unit's forward and backward, in execution order: the only way
 * the runtime takes part in a model's pass. The FSDP engine's hooks all-gather the unit's
 * parameters and bind them ({@link Unit#param}) before it runs, bind its gradient buffers
 * ({@link Unit#grad}) for the backward, free the gathered parameters after it, reduce
 * the finished gradients over the ranks, and prefetch the next units; the model knows nothing
 * of this.
 *
 * <pre>{@code
 * hooks.preForward(block);   ... forward reads block.param(i) ...   hooks.postForward(block);
 * hooks.preBackward(block);  ... backward adds to block.grad(i) ... hooks.postBackward(block);
 * }</pre>
 *
 * <p>A unit's forward or backward may come in segments, each bracketed by its own pre/post call;
 * between two segments the unit's parameters are not read, so the engine may free them. A GPT's
 * root is the case that needs it: its forward is the embedding (first) and the head (last), its
 * backward the head (first) and the embedding (last), and the embedding's backward only writes
 * gradients. A unit that is never split calls the one-argument forms, which mean "one segment,
 * the last".
 *
 * <p>The model calls the hooks on the thread that runs its forward and backward (the rank's);
 * they may block while a collective completes, and they throw when the runtime fails (a rank
 * failed or a collective timed out), which the model lets propagate.
 */
public interface UnitHooks {

    /**
     * Before each forward segment of the unit: its parameters are bound from here to the matching
     * {@link #postForward(Unit, boolean)}. (A checkpointed unit's recompute in backward runs after
     * {@link #preBackward(Unit, boolean)}, not here.)
     *
     * @param unit the unit about to run, one of the model's {@link TrainableModel#units()}
     */
    void preForward(Unit unit);

    /**
     * After a forward segment has used the unit's parameters for the last time in that segment.
     *
     * @param unit the unit that ran
     * @param last true after the unit's final forward segment of the pass
     */
    void postForward(Unit unit, boolean last);

    /**
     * Before a backward segment of the unit (including any recompute of its activations). The
     * unit's gradients are bound from here to the matching
     * {@link #postBackward(Unit, boolean)} and accumulate across its segments.
     *
     * @param unit        the unit about to run backward
     * @param readsParams false when the segment only writes gradients (an embedding's backward),
     *                    so its parameters need not be gathered (and are not bound)
     */
    void preBackward(Unit unit, boolean readsParams);

    /**
     * After a backward segment has written its gradients.
     *
     * @param unit the unit that ran backward
     * @param last true after the unit's final backward segment of the pass (its gradient for this
     *             pass is then complete)
     */
    void postBackward(Unit unit, boolean last);

    /**
     * The unit's only forward segment ends: {@code postForward(unit, true)}.
     *
     * @param unit the unit that ran
     */
    default void postForward(Unit unit) {
        postForward(unit, true);
    }

    /**
     * The unit's only backward segment begins; it reads the parameters:
     * {@code preBackward(unit, true)}.
     *
     * @param unit the unit about to run backward
     */
    default void preBackward(Unit unit) {
        preBackward(unit, true);
    }

    /**
     * The unit's only backward segment ends: {@code postBackward(unit, true)}.
     *
     * @param unit the unit that ran backward
     */
    default void postBackward(Unit unit) {
        postBackward(unit, true);
    }

    /**
     * Hooks that do nothing, for a model run outside FSDP whose parameters and gradients are
     * bound once and stay bound (the tests' unsharded store).
     */
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
