// The debug streams have teeth: with one of the engine's cross-stream waits switched off (the
// engine's test hook; no code edited), a run under the debug mode (every stream a worker with
// random delays, freed memory poisoned) no longer matches the unsharded reference. Each wait
// below guards a different hand-off: parameters from the all-gather to the compute, the
// optimizer's update (and a reused buffer) from the compute to the all-gather, and gradients from
// the backward to the reduce-scatter. (Without COMPUTE_ON_REDUCTIONS a run goes wrong only when
// the last reduction happens to lose its race with the norm's read, about two runs in five: not a
// test that must fail, so it is not here.)
// And the budget of host synchronisations: a step reads the loss and the norm once, nothing more.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.opentest4j.AssertionFailedError;

class FsdpStreamOrderTest {

    @ParameterizedTest
    @EnumSource(value = FsdpEngine.Wait.class, names = {"COMPUTE_ON_ALL_GATHER", "ALL_GATHER_ON_COMPUTE",
            "REDUCE_ON_BACKWARD"})
    void aMissingWaitIsCaughtByTheDebugStreams(FsdpEngine.Wait skipped) {
        FsdpTestSupport t = new FsdpTestSupport();
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        FsdpConfig config = FsdpTestSupport.config(4, ShardingStrategy.FULL_SHARD);
        List<FsdpTestSupport.RankTrajectory> ranks = t.sharded(config, SGD, false, UnaryOperator.identity(),
                engine -> engine.skipWaitForTest(skipped));
        AssertionFailedError e = assertThrows(AssertionFailedError.class,
                () -> t.assertMatches("full_shard N=4 without " + skipped, ref, ranks, FsdpEquivalenceTest.FP32),
                "without " + skipped + " the run must go wrong under the debug streams");
        System.out.println("without " + skipped + ": " + e.getMessage());
    }

    @ParameterizedTest
    @EnumSource(value = ShardingStrategy.class)
    void aStepSynchronisesTheHostOnce(ShardingStrategy strategy) {
        FsdpTestSupport t = new FsdpTestSupport();
        for (int n : new int[] {1, 4}) {
            FsdpConfig c = FsdpTestSupport.config(n, strategy);
            try (LocalFsdpGroup g = new LocalFsdpGroup(c, (r, b) -> new GptModel(FsdpTestSupport.TINY, b, false), SGD,
                    t.seed, Device.CPU, FsdpTestSupport.RANK_BACKEND,
                    UnaryOperator.identity())) {
                for (int s = 0; s < 3; s++) {
                    for (FsdpStepResult r : g.step(FsdpTestSupport.batch(t.tokens[s], t.targets[s]), 0.1f)) {
                        assertEquals(1, r.hostSyncs(), strategy.cliName() + " N=" + n + " step " + (s + 1)
                                + ": the one read of loss and norm, nothing else");
                        assertEquals(0, r.promotedCopies(), "fp32 throughout");
                    }
                }
            }
        }
    }
}
