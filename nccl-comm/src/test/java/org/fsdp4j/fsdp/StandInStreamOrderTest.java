// The stand-in's streams have teeth: with one of the engine's cross-stream waits switched off
// (FsdpEngine's test hook, no code edited), two ranks sharing a stand-in GPU no longer match the
// unsharded reference: the stand-in runs every stream on its own worker with random delays, so
// work that nothing orders runs in either order, as on a GPU under load, and memory fresh from
// cudaMalloc reads as NaN. (ALL_GATHER_ON_COMPUTE, which the CPU's debug streams catch by poisoning
// the blocks their allocator hands out again, is not here: the stand-in sees only cudaMalloc and
// cudaFree, not the caching allocator's reuse; COMPUTE_ON_REDUCTIONS goes wrong only when a race is
// lost, about every other run.) Whether an unordered pair of streams actually runs in the wrong
// order is up to the random delays, so a run that happened to come out right is tried again, up to
// ATTEMPTS times; the test fails only if every attempt matched the reference (COMPUTE_ON_ALL_GATHER
// came out right in about 1 of 9 single runs). Fake-GPU run only (tag "standin").
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.opentest4j.AssertionFailedError;

@Tag("standin")
class StandInStreamOrderTest {

    private static final int ATTEMPTS = 4;

    @ParameterizedTest
    @EnumSource(value = FsdpEngine.Wait.class, names = {"COMPUTE_ON_ALL_GATHER", "REDUCE_ON_BACKWARD"})
    void aMissingWaitIsCaughtByTheStandInStreams(FsdpEngine.Wait skipped) {
        StandIns.assumeStandIns();
        FsdpTestSupport t = new FsdpTestSupport(Device.cuda(0),
                n -> new LocalGroup(n, Duration.ofSeconds(60), LocalGroup.Dispatch.STREAM_EVENTS));
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        FsdpOptions config = FsdpTestSupport.config(2, ShardingStrategy.FULL_SHARD);
        for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
            List<FsdpTestSupport.RankTrajectory> ranks = t.sharded(config, SGD, false, UnaryOperator.identity(),
                    engine -> engine.skipWaitForTest(skipped));
            try {
                t.assertMatches("full_shard N=2 without " + skipped, ref, ranks, GpuFsdpEquivalenceTest.GPU_FP32);
            } catch (AssertionFailedError e) {
                System.out.println("without " + skipped + " (attempt " + attempt + "): " + e.getMessage());
                return;
            }
            System.out.println("without " + skipped + ": attempt " + attempt + " happened to run in a safe order");
        }
        fail("without " + skipped + " the run must go wrong on the stand-in's streams, but " + ATTEMPTS
                + " runs matched the reference");
    }
}
