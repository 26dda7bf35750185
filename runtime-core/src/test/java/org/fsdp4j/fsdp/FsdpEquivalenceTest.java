// Sharded training equals unsharded training: for every strategy and N ∈ {1, 2, 3, 4, 8},
// K = 5 SGD-momentum steps on the same global batches give the reference's losses and, shard
// by shard, its parameters and gradients (docs/ARCHITECTURE.md, "Numerics"). fp32 is held to 1e-5.
// Both ways the in-process group can run its collectives: host functions on the CPU streams, and
// the stream events that ranks sharing a GPU use (here on CPU ranks, under the debug streams).
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;

import java.util.List;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.fsdp.FsdpTestSupport.Tolerance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class FsdpEquivalenceTest {

    /** fp32: only the order of summation differs (batch split over ranks, reductions in rank order). */
    static final Tolerance FP32 = new Tolerance(1e-5, 1e-5, 1e-5);

    @ParameterizedTest
    @EnumSource(LocalGroup.Dispatch.class)
    void everyStrategyAndWorldSizeMatchesOneUnshardedRank(LocalGroup.Dispatch dispatch) {
        FsdpTestSupport t = new FsdpTestSupport(dispatch);
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (ShardingStrategy strategy : ShardingStrategy.values()) {
            for (int n : new int[] {1, 2, 3, 4, 8}) {
                FsdpOptions config = FsdpTestSupport.config(n, strategy);
                List<FsdpTestSupport.RankTrajectory> ranks = t.sharded(config, SGD, false);
                t.assertMatches(strategy.cliName() + " N=" + n + " S=" + config.shardSize() + " " + dispatch, ref, ranks,
                        FP32);
            }
        }
    }
}
