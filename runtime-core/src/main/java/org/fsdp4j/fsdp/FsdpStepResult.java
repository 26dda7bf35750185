// What one sharded step reports on every rank (the values are the same on all of them, except
// the communication volume, which is this rank's).
package org.fsdp4j.fsdp;

import org.fsdp4j.comm.CommBytes;

/**
 * @param loss       mean cross-entropy over the global batch (all ranks, all micro-batches)
 * @param gradNorm   global gradient norm before clipping, unscaled (inf/NaN when the step overflowed)
 * @param skipped    the fp16 loss scaler found inf/NaN gradients, so the parameters were not updated
 * @param lossScale  the loss scale this step used (1 without fp16)
 * @param commBytes  what this rank sent and received during the step, per collective
 * @param hostSyncs  times this rank's host waited for its device during the step (the budget is one)
 * @param promotedCopies GEMMs of the step whose operand dtypes differed (a promoting copy on CUDA; 0 expected)
 */
public record FsdpStepResult(float loss, double gradNorm, boolean skipped, float lossScale, CommBytes commBytes,
                             long hostSyncs, long promotedCopies) {
}
