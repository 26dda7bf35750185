// What the FSDP engine needs of an optimizer: an immutable set of hyperparameters
// that updates parameter segments in place. It owns no buffers (the FSDP engine keeps them per
// shard, ShardedUnit), so one value serves shard slices and the tests' whole parameters alike.
package org.fsdp4j.optim;

import java.util.List;
import org.fsdp4j.backend.Backend;

public interface Optimizer {

    /** The learning rate this value steps with. */
    float lr();

    /** The same optimizer with another learning rate (what a schedule sets each step). */
    Optimizer withLr(float lr);

    /** State buffers per parameter element: 2 for AdamW (m, v), 1 for SGD with momentum. */
    int stateBuffersPerParam();

    /** The state buffers' names, as PyTorch's optimizer calls them (checkpoints key them so). */
    java.util.List<String> stateNames();

    /**
     * One update of every segment. {@code step} counts from 1 (bias correction); every gradient is
     * multiplied by {@code gradScale} first (loss-scale unscaling and clipping in one factor).
     */
    void step(Backend backend, List<ParamSegment> segments, int step, float gradScale);
}
