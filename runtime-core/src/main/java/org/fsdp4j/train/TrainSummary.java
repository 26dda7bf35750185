// The record of a finished run that --out writes as summary.json (keys in snake_case). Arrays
// named *_per_rank have one entry per rank, in rank order.
package org.fsdp4j.train;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.util.Map;

/**
 * @param preset                  model preset name
 * @param params                  model parameters
 * @param worldSize               ranks
 * @param device                  resolved device
 * @param backend                 backend in words
 * @param data                    data source in words
 * @param steps                   steps run
 * @param batchSize               B
 * @param seqLen                  T
 * @param seed                    the run's seed
 * @param lossFloor               the data's entropy rate in nats, absent when unknown
 * @param losses                  the loss of every step
 * @param finalLoss               the loss of the last step
 * @param tailLossMean            mean loss of the last {@link Trainer#TAIL_STEPS} steps (less noisy than one batch)
 * @param stepTimeMsMedian        median step time
 * @param tokensPerSecond         B·T / median step time
 * @param totalTimeS              wall time of all steps
 * @param persistentBytesPerRank  params + grads + optimizer bytes live after the last step
 * @param peakBytesPerRank        the highest live bytes over the run
 * @param peakBytesByCategory     per memory category (params, grads, ...), the highest live bytes per rank
 */
public record TrainSummary(String preset, long params, int worldSize, String device, String backend, String data,
                           int steps, int batchSize, int seqLen, long seed,
                           @JsonInclude(JsonInclude.Include.NON_NULL) Double lossFloor,
                           float[] losses, float finalLoss, double tailLossMean, double stepTimeMsMedian,
                           double tokensPerSecond, double totalTimeS, long[] persistentBytesPerRank,
                           long[] peakBytesPerRank, Map<String, long[]> peakBytesByCategory) {
}
