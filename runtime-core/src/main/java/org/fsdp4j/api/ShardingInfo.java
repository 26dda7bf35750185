// What a sharded model is, once built: where its ranks run, how many parameters it has with
// and without the shards' padding, and how the engine schedules gathered parameters. For run
// headers, summaries and memory checks; nothing here changes a step.
package org.fsdp4j.api;

import java.util.Optional;
import java.util.OptionalDouble;

/**
 * What {@link Fsdp#shard} built.
 *
 * @param options            the options it was built with
 * @param device             the device the options' {@code device} resolved to (rank 0's)
 * @param worldSize          ranks N in the run
 * @param firstRank          the first rank this process runs
 * @param localRanks         ranks this process runs (all N unless the run spans processes)
 * @param parameterCount     parameters of the model, unpadded
 * @param paddedParameterCount parameters plus the flat layout's alignment and shard padding (P′)
 * @param backendName        rank 0's backend, in words ("cpu (PanelGemm 6x4 + OpenBLAS, 4 threads)")
 * @param peakTflopsPerRank  one rank's dense GEMM peak in the compute dtype, where the device is known (GPUs)
 * @param gatherSchedule     how gathered parameters and unsharded gradients are scheduled; empty when nothing is gathered
 */
public record ShardingInfo(FsdpOptions options, Device device, int worldSize, int firstRank, int localRanks,
                           long parameterCount, long paddedParameterCount, String backendName,
                           OptionalDouble peakTflopsPerRank, Optional<GatherSchedule> gatherSchedule) {

    /**
     * The engine's schedule for gathered parameters and unsharded gradients, and the memory it plans for them.
     *
     * @param name          the schedule's name ("per_unit", "root_grad_split", ...)
     * @param budgetBytes   the bytes the schedule is bounded by (0 when unbounded)
     * @param peakBytes     the most bytes of gathered parameters and gradients alive at once
     * @param keptPeakBytes of those, the bytes kept across forward and backward
     * @param inPlace       the in-process ranks read one shared copy of the fp32 masters instead of
     *                      gathering into buffers of their own (no gathered bytes)
     */
    public record GatherSchedule(String name, long budgetBytes, long peakBytes, long keptPeakBytes, boolean inPlace) {

        /**
         * Whether the peak stays within the budget.
         *
         * @return true when unbounded or the peak is at most the budget
         */
        public boolean fitsBudget() {
            return budgetBytes == 0 || peakBytes <= budgetBytes;
        }
    }
}
