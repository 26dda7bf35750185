// A step's predicted cost: the tracked bytes at its peak on one rank's device (split as the
// tracker splits them), the host bytes an offloading rank keeps, the largest single buffer (the
// CPU backend caps one buffer at 2 GiB) and the floating-point work.
package org.fsdp4j.plan;

/**
 * @param peakBytesPerRank        tracked device bytes at the step's peak, one rank
 * @param persistentBytesPerRank  of which params + grads + optimizer state (on the device)
 * @param temporaryBytesPerRank   of which gathered parameters, unsharded gradients and workspace
 * @param activationBytesPerRank  of which activations (and the batch's tokens)
 * @param hostBytesPerRank        offloaded state kept on the host by one rank (0 without offload)
 * @param largestBufferBytes      the largest single allocation of the step
 * @param flopsPerStep            floating-point operations of one step, all ranks together
 */
public record StepCost(long peakBytesPerRank, long persistentBytesPerRank, long temporaryBytesPerRank,
                       long activationBytesPerRank, long hostBytesPerRank, long largestBufferBytes,
                       double flopsPerStep) {
}
