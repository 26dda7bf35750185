// The preflight refuses a run whose estimated peak exceeds the memory it is given, names the
// flags that would make it fit (each checked against the same model, with room to spare), and
// flags a buffer over the CPU backend's 2 GiB limit. Its estimate is the Planner's (PlannerRuntimeTest).
// In-process ranks share the host's RAM; a process of several checks its host for the ranks of
// every process there.
package org.fsdp4j.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.OptionalLong;
import org.fsdp4j.api.Device;
import org.fsdp4j.plan.StepCost;
import org.junit.jupiter.api.Test;

class PreflightTest {

    private static final StepCostModel MODEL = StepCostModel.PLANNER;

    private static TrainConfig.Builder small() {
        return TrainConfig.builder().preset("small").batchSize(8).fsdp(f -> f.device("cpu"));
    }

    @Test
    void refusesARunOverTheLimitAndNamesWhatWouldFit() {
        TrainConfig config = small().build();
        long peak = MODEL.estimate(config).peakBytesPerRank();
        long checkpointed = MODEL.estimate(small().fsdp(f -> f.activationCheckpointing(true)).build()).peakBytesPerRank();
        long limit = (long) (checkpointed / (1 - Preflight.FIX_HEADROOM)) + 1;   // checkpointing just fits
        assertTrue(limit < peak, "the small preset's activations dominate its peak");
        Preflight.Report r = Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(limit), false);
        assertFalse(r.fitsMemory());
        assertEquals(peak, r.neededBytes());
        assertFalse(r.fixes().isEmpty());
        List<String> flags = r.fixes().stream().map(Preflight.Fix::flags).toList();
        assertTrue(flags.contains("--checkpoint-activations"), flags.toString());
        assertTrue(flags.stream().anyMatch(f -> f.startsWith("--micro-batches ")), flags.toString());
        assertTrue(flags.stream().anyMatch(f -> f.startsWith("--batch-size ")), flags.toString());
        for (Preflight.Fix f : r.fixes()) {
            assertTrue(f.neededBytes() <= limit * (1 - Preflight.FIX_HEADROOM), f + " vs limit " + limit);
        }
        // the suggested batch size is the largest that fits: one more step up does not
        int b = Integer.parseInt(flags.stream().filter(f -> f.startsWith("--batch-size ")).findFirst().orElseThrow()
                .substring("--batch-size ".length()));
        long next = MODEL.estimate(small().batchSize(b + 1).build()).peakBytesPerRank();
        assertTrue(next > limit * (1 - Preflight.FIX_HEADROOM), "batch " + (b + 1) + " would fit too");

        assertTrue(Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(peak), false).fitsMemory(),
                "exactly the estimate fits");
        assertTrue(Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(peak), false).fixes().isEmpty());
    }

    @Test
    void inProcessRanksShareTheHostsMemory() {
        TrainConfig config = small().fsdp(f -> f.worldSize(4)).build();
        Preflight.Report r = Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(Long.MAX_VALUE), false);
        assertEquals(4, r.sharingRanks());
        assertEquals(4 * r.cost().peakBytesPerRank(), r.neededBytes());
    }

    @Test
    void aProcessOfSeveralChecksItsHostForTheRanksOfEveryProcessThere() {
        // 8 ranks over 4 processes, 2 of them on this host: the host's RAM holds 2 × 2 ranks, not 8, not 2
        TrainConfig config = small().fsdp(f -> f.worldSize(8)).build();
        Preflight.Placement placement = new Preflight.Placement(4, 2, 1);
        Preflight.Report r = Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(Long.MAX_VALUE), false, placement);
        assertEquals(4, r.sharingRanks());
        assertEquals(4 * r.cost().peakBytesPerRank(), r.neededBytes());
        assertEquals(8, Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(Long.MAX_VALUE), false).sharingRanks(),
                "in one process the host holds every rank");

        // room for 2 of the host's 4 ranks, with a model whose need per rank is fixed: fewer ranks is
        // suggested only as a world size every process holds as many of (24 splits over 6 ranks, not 4 processes)
        StepCostModel fixedPerRank = (c, onGpu) -> new StepCost(1000, 400, 100, 500, 0, 100, 1e6);
        Preflight.Report over = Preflight.check(small().fsdp(f -> f.worldSize(8)).batchSize(24).build(), Device.CPU, fixedPerRank,
                OptionalLong.of(3000), false, placement);
        assertFalse(over.fitsMemory());
        assertEquals(4000, over.neededBytes());
        assertEquals(List.of(new Preflight.Fix("--world-size 4", 2000)), over.fixes(), "2 processes x 1 rank on this host");
    }

    @Test
    void ranksSharingOneGpuShareItsMemory() {
        // --device cuda:0 puts every rank on GPU 0, so their peaks add up there (no CUDA provider in
        // this module: the placement alone decides, and no backend reserve is added)
        TrainConfig config = small().fsdp(f -> f.device("cuda:0").worldSize(2)).build();
        Preflight.Report r = Preflight.check(config, Device.cuda(0), MODEL, OptionalLong.of(Long.MAX_VALUE), false);
        assertEquals(2, r.sharingRanks());
        assertEquals(2 * r.cost().peakBytesPerRank(), r.neededBytes());
        assertEquals("GPU memory", r.memoryKind());
    }

    @Test
    void aBufferOverTheCpuLimitIsFlaggedWithABatchThatFits() {
        // (b, H, T, T) attention probabilities of the small preset: 6 · 256² · 4 B = 1.5 MiB per sequence
        TrainConfig config = small().batchSize(4096).build();
        Preflight.Report r = Preflight.check(config, Device.CPU, MODEL, OptionalLong.of(Long.MAX_VALUE), false);
        assertTrue(r.fitsMemory(), "with memory to spare only the buffer limit applies");
        assertTrue(r.bufferTooLarge(), r.toString());
        assertFalse(r.fixes().isEmpty());
        for (Preflight.Fix f : r.fixes()) {
            assertTrue(f.flags().startsWith("--micro-batches ") || f.flags().startsWith("--batch-size "), f.toString());
        }
    }
}
