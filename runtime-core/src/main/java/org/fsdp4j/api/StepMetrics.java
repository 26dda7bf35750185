// What one training step reports to its caller: the numbers a training loop logs, and the
// counters that show whether the step ran as designed (one host synchronisation, no promoted
// GEMMs) and what it sent. The engine reports each rank's step in this record and joins its
// ranks' into one, which the trainer uses as it is: a step's figures are not re-wrapped on the way.
package org.fsdp4j.api;

/**
 * What one step of {@link ShardedModel#step} measured.
 *
 * @param loss             mean loss over the global batch (every rank, every micro-batch)
 * @param gradNorm         global gradient norm before clipping, unscaled; inf or NaN when the step overflowed
 * @param skipped          true when the gradients held inf or NaN, so the parameters were not updated
 *                         (under fp16 the loss scale was halved)
 * @param lossScale        the loss scale this step used (1 without fp16)
 * @param hostSyncs        the most times a rank's host waited for its device during the step (one by design)
 * @param promotedCopies   GEMMs whose operand dtypes differed, summed over this process's ranks (0 by design)
 * @param sentBytesPerRank bytes each of this process's ranks sent in the step's collectives, in rank order
 */
public record StepMetrics(float loss, double gradNorm, boolean skipped, float lossScale, long hostSyncs,
                          long promotedCopies, long[] sentBytesPerRank) {

    /**
     * Copies the array.
     *
     * @param loss             mean loss over the global batch (every rank, every micro-batch)
     * @param gradNorm         global gradient norm before clipping, unscaled; inf or NaN when the
     *                         step overflowed
     * @param skipped          true when the gradients held inf or NaN, so the parameters were not
     *                         updated (under fp16 the loss scale was halved)
     * @param lossScale        the loss scale this step used (1 without fp16)
     * @param hostSyncs        the most times a rank's host waited for its device during the step
     *                         (one by design)
     * @param promotedCopies   GEMMs whose operand dtypes differed, summed over this process's
     *                         ranks (0 by design)
     * @param sentBytesPerRank bytes each of this process's ranks sent in the step's collectives,
     *                         in rank order
     */
    public StepMetrics {
        sentBytesPerRank = sentBytesPerRank.clone();
    }

    /**
     * Bytes each of this process's ranks sent, in rank order.
     *
     * @return a copy
     */
    @Override
    public long[] sentBytesPerRank() {
        return sentBytesPerRank.clone();
    }
}
