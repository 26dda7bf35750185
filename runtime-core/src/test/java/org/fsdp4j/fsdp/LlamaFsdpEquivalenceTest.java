// Sharded training equals unsharded training for the Llama too: every strategy at N ∈ {1, 2, 4},
// K = 5 SGD-momentum steps on the same global batches give the unsharded LlamaModel's losses and,
// shard by shard, its parameters and gradients, under the debug streams (FsdpTestSupport.RANK_BACKEND),
// plus one run with activation checkpointing (LlamaBlock's recompute). The model's root carries an
// untied head and the blocks nine parameters with grouped-query projections, so the unit layouts and
// the root's segments differ from the GPT's (FsdpEquivalenceTest). fp32 is held to 1e-5.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpEquivalenceTest.FP32;
import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;

import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.comm.LocalGroup;
import org.junit.jupiter.api.Test;

class LlamaFsdpEquivalenceTest {

    @Test
    void everyStrategyAtOneTwoAndFourRanksMatchesOneUnshardedLlama() {
        FsdpTestSupport t = new FsdpTestSupport(FsdpTestSupport.TINY_LLAMA, LocalGroup.Dispatch.HOST_FUNCTIONS);
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (ShardingStrategy strategy : ShardingStrategy.values()) {
            for (int n : new int[] {1, 2, 4}) {
                FsdpOptions config = FsdpTestSupport.config(n, strategy);
                t.assertMatches("llama " + strategy.cliName() + " N=" + n + " S=" + config.shardSize(), ref,
                        t.sharded(config, SGD, false), FP32);
            }
        }
        t.assertMatches("llama full_shard N=2 checkpointed", ref,
                t.sharded(FsdpTestSupport.config(2, ShardingStrategy.FULL_SHARD), SGD, true), FP32);
    }
}
