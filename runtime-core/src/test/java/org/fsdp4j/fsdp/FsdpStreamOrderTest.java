// The debug streams have teeth: with one of the engine's cross-stream waits switched off (the
// engine's test hook; no code edited), a run under the debug mode (every stream a worker with
// random delays, freed memory poisoned) no longer matches the unsharded reference. Each wait
// below guards a different hand-off: parameters from the all-gather to the compute, the
// optimizer's update (and a reused buffer) from the compute to the all-gather, and gradients from
// the backward to the reduce-scatter. (Without COMPUTE_ON_REDUCTIONS a run goes wrong only when
// the last reduction happens to lose its race with the norm's read, about two runs in five: not a
// test that must fail, so it is not here.)
// Each runs as separate processes run (a buffer and copies per gather); REDUCE_ON_BACKWARD also
// with the in-process ranks' masters side by side in one buffer that the all-gathers read in
// place (the default for in-process ranks). In place, the two all-gather waits guard a narrower
// window: without them a rank reads a peer's chunk before the peer's update of the step before
// has landed (the peer's compute has queued only its optimizer's few ops), which the debug
// streams' random delays hit too rarely for a test that must fail (measured: not caught in one run
// each).
// And the budget of host synchronisations: a step reads the loss and the norm once, nothing more.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.StepMetrics;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.SeparateAddressSpaces;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.opentest4j.AssertionFailedError;

class FsdpStreamOrderTest {

    static Stream<Arguments> missingWaits() {
        return Stream.of(
                Arguments.of(FsdpEngine.Wait.COMPUTE_ON_ALL_GATHER, false),
                Arguments.of(FsdpEngine.Wait.ALL_GATHER_ON_COMPUTE, false),
                Arguments.of(FsdpEngine.Wait.REDUCE_ON_BACKWARD, false),
                Arguments.of(FsdpEngine.Wait.REDUCE_ON_BACKWARD, true));
    }

    @ParameterizedTest(name = "{0}, masters shared in place: {1}")
    @MethodSource("missingWaits")
    void aMissingWaitIsCaughtByTheDebugStreams(FsdpEngine.Wait skipped, boolean inPlace) {
        FsdpTestSupport t = new FsdpTestSupport();
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        FsdpOptions config = FsdpTestSupport.config(4, ShardingStrategy.FULL_SHARD);
        UnaryOperator<Communicator> link = inPlace ? UnaryOperator.identity() : SeparateAddressSpaces::new;
        List<FsdpTestSupport.RankTrajectory> ranks = t.sharded(config, SGD, false, link,
                engine -> engine.skipWaitForTest(skipped));
        String what = "full_shard N=4 without " + skipped + (inPlace ? ", masters shared" : ", copies");
        AssertionFailedError e = assertThrows(AssertionFailedError.class,
                () -> t.assertMatches(what, ref, ranks, FsdpEquivalenceTest.FP32),
                what + ": the run must go wrong under the debug streams");
        System.out.println(what + ": " + e.getMessage());
    }

    @ParameterizedTest
    @EnumSource(value = ShardingStrategy.class)
    void aStepSynchronisesTheHostOnce(ShardingStrategy strategy) {
        FsdpTestSupport t = new FsdpTestSupport();
        for (int n : new int[] {1, 4}) {
            FsdpOptions c = FsdpTestSupport.config(n, strategy);
            try (LocalFsdpGroup g = new LocalFsdpGroup(c, ctx -> new GptModel(FsdpTestSupport.TINY, ctx.ops(), false), SGD,
                    t.seed, Device.CPU, FsdpTestSupport.RANK_BACKEND,
                    UnaryOperator.identity())) {
                for (int s = 0; s < 3; s++) {
                    for (StepMetrics r : g.stepEachRank(FsdpTestSupport.batch(t.tokens[s], t.targets[s]), 0.1f)) {
                        assertEquals(1, r.hostSyncs(), strategy.cliName() + " N=" + n + " step " + (s + 1)
                                + ": the one read of loss and norm, nothing else");
                        assertEquals(0, r.promotedCopies(), "fp32 throughout");
                    }
                }
            }
        }
    }
}
