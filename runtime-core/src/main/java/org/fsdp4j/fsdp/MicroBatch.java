// One forward/backward pass's worth of this rank's data: tokens and targets (b, T) I32 on the
// rank's backend, owned by the caller.
package org.fsdp4j.fsdp;

import org.fsdp4j.tensor.Tensor;

public record MicroBatch(Tensor tokens, Tensor targets) {
}
