// ShardedModel.evaluate's engine path on GPUs (FsdpEvaluateTest's checks, as GpuFsdpEquivalenceTest
// repeats FsdpEquivalenceTest's): ranks sharing one GPU through stream events and, where there are
// devices enough (the stand-ins report several), N = 2 through NCCL with rank r on cuda:r. The
// evaluation leaves every rank's master shard bit for bit, allocates no gradient, frees its
// activations and gathered units, agrees across N and is the loss the next step reports on that batch.
// Needs a GPU or the stand-ins (and NCCL for the NCCL case); skipped with the reason otherwise.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;
import static org.fsdp4j.fsdp.FsdpTestSupport.TINY;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import java.util.function.UnaryOperator;
import java.util.stream.IntStream;
import org.fsdp4j.api.Batch;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.cuda.StandIns;
import org.fsdp4j.nccl.NcclGroup;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

class GpuFsdpEvaluateTest {

    private final FsdpTestSupport t = new FsdpTestSupport(Device.cuda(0),
            n -> new LocalGroup(n, Duration.ofSeconds(60), LocalGroup.Dispatch.STREAM_EVENTS));

    /** Evaluates batch 1 after a step on batch 0 and returns the loss, after checking what it must leave alone. */
    private float evaluateAfterAStep(String what, int n, List<Device> devices, RankGroup group) {
        Batch first = FsdpTestSupport.batch(t.tokens[0], t.targets[0]);
        Batch second = FsdpTestSupport.batch(t.tokens[1], t.targets[1]);
        try (LocalFsdpGroup g = new LocalFsdpGroup(FsdpTestSupport.config(n, ShardingStrategy.FULL_SHARD), TINY.factory(),
                SGD, t.seed, devices, new BackendOptions(1, false), UnaryOperator.identity(), group)) {
            g.step(first, FsdpTestSupport.LR);
            List<List<float[]>> before = masters(g);
            List<MemoryTracker> memory = g.deviceMemory();
            memory.forEach(MemoryTracker::resetPeak);
            long[] live = memory.stream().mapToLong(MemoryTracker::liveBytes).toArray();
            long[] grads = memory.stream().mapToLong(m -> m.liveBytes(MemoryCategory.GRADS)).toArray();

            float loss = g.evaluate(second);

            List<List<float[]>> after = masters(g);
            for (int r = 0; r < n; r++) {
                MemoryTracker m = memory.get(r);
                assertEquals(grads[r], m.peakBytes(MemoryCategory.GRADS), what + " rank " + r + ": gradient memory allocated");
                assertEquals(live[r], m.liveBytes(), what + " rank " + r + ": memory left behind " + m.liveByCategory());
                for (int u = 0; u < before.get(r).size(); u++) {
                    assertArrayEquals(before.get(r).get(u), after.get(r).get(u), what + " rank " + r + " unit " + u);
                }
            }
            assertEquals(loss, g.step(second, FsdpTestSupport.LR).loss(), 0f, what + ": the step's loss on that batch");
            return loss;
        }
    }

    /** Every rank's master shard of every unit, copied to the host. */
    private static List<List<float[]>> masters(LocalFsdpGroup g) {
        return g.onEachRank((r, engine) -> {
            List<float[]> out = new ArrayList<>();
            for (int u = 0; u < engine.layouts().size(); u++) {
                out.add(engine.shard(u).master());
            }
            return out;
        });
    }

    @Test
    @Tag("gpu")
    void evaluatesOnGpusAsOnTheCpu() {
        int devices = StandIns.assumeGpu().deviceCount();
        IntFunction<RankGroup> sharing = n -> new LocalGroup(n, Duration.ofSeconds(60), LocalGroup.Dispatch.STREAM_EVENTS);
        float one = evaluateAfterAStep("cuda:0 N=1", 1, List.of(Device.cuda(0)), sharing.apply(1));
        float two = evaluateAfterAStep("cuda:0 N=2", 2, List.of(Device.cuda(0), Device.cuda(0)), sharing.apply(2));
        // fp32, the two ranks' losses summed in another order than one rank's: a few ulps of a loss near ln 37
        assertEquals(one, two, 1e-5f * one, "N=2 sharing cuda:0 vs N=1 (seed " + t.seed + ")");
        if (devices >= 2) {
            float nccl = evaluateAfterAStep("NCCL N=2", 2, IntStream.range(0, 2).mapToObj(Device::cuda).toList(),
                    NcclGroup.create(2, Duration.ofSeconds(60)));
            assertEquals(one, nccl, 1e-5f * one, "N=2 through NCCL vs N=1 (seed " + t.seed + ")");
        }
    }
}
