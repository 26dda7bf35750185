// Which units the engine keeps gathered between their hooks (FULL_SHARD, N = 2): every block is
// freed after its forward except the last of the forward order, which stays gathered into its
// backward when a prefetch (depth >= 1) would have fetched it at once (torchtitan's default); at
// depth 0 it is freed like the others. A pass that runs its blocks in another order than the one
// before must not hold the kept block beside the next one: at most 1 + depth units are gathered
// at any hook. A scripted model (hooks only, no compute) lets each pass pick its block order.
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.Inputs;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.TrainableModel;
import org.fsdp4j.api.Unit;
import org.fsdp4j.api.UnitHooks;
import org.junit.jupiter.api.Test;

class FsdpReshardTest {

    private static final int BLOCKS = 3;

    /** A root (two segments each way, as a GPT's) and BLOCKS blocks, run in the order the test sets per pass. */
    private static final class ScriptedModel implements TrainableModel {
        final List<Unit> units = new ArrayList<>();
        final List<List<Integer>> orders;             // block indices (1..BLOCKS) per pass, cycled
        final Map<String, Boolean> boundAfterForward = new ConcurrentHashMap<>();   // "pass:block" -> still gathered
        final Map<String, Integer> othersBound = new ConcurrentHashMap<>();   // "pass:block" -> other blocks gathered then
        int pass;
        int mostGathered;

        ScriptedModel(List<List<Integer>> orders) {
            this.orders = orders;
            units.add(new Unit("root", 0, List.of(ParamSpec.normal("w", 0.02, false, 64))));
            for (int b = 1; b <= BLOCKS; b++) {
                units.add(new Unit("b" + b, b, List.of(ParamSpec.normal("w", 0.02, false, 96))));
            }
        }

        private void count() {
            int gathered = 0;
            for (Unit u : units) {
                gathered += u.paramsBound() ? 1 : 0;
            }
            mostGathered = Math.max(mostGathered, gathered);
        }

        private List<Integer> order() {
            return orders.get(pass % orders.size());
        }

        @Override
        public List<Unit> units() {
            return units;
        }

        @Override
        public void forward(Inputs inputs, UnitHooks hooks, Tensor loss) {
            Unit root = units.get(0);
            hooks.preForward(root);
            count();
            hooks.postForward(root, false);
            for (int b : order()) {
                Unit u = units.get(b);
                hooks.preForward(u);
                count();
                hooks.postForward(u, true);
                boundAfterForward.put(pass + ":" + b, u.paramsBound());
                int others = 0;
                for (int o = 1; o <= BLOCKS; o++) {
                    others += o != b && units.get(o).paramsBound() ? 1 : 0;
                }
                othersBound.put(pass + ":" + b, others);
            }
            hooks.preForward(root);
            count();
            hooks.postForward(root, true);
        }

        @Override
        public void backward(UnitHooks hooks, float lossScale) {
            Unit root = units.get(0);
            hooks.preBackward(root, true);
            count();
            hooks.postBackward(root, false);
            List<Integer> reversed = new ArrayList<>(order());
            Collections.reverse(reversed);
            for (int b : reversed) {
                Unit u = units.get(b);
                hooks.preBackward(u, true);
                count();
                hooks.postBackward(u, true);
            }
            hooks.preBackward(root, false);
            hooks.postBackward(root, true);
            pass++;
        }

        @Override
        public void close() {
        }
    }

    /** Runs len(orders) steps at {@code depth} and returns rank 0's model. */
    private static ScriptedModel run(int depth, List<List<Integer>> orders) {
        FsdpTestSupport t = new FsdpTestSupport();
        FsdpOptions c = FsdpTestSupport.config(2, ShardingStrategy.FULL_SHARD).toBuilder().prefetch(depth).build();
        List<ScriptedModel> models = Collections.synchronizedList(new ArrayList<>());
        try (LocalFsdpGroup g = new LocalFsdpGroup(c, ctx -> {
            ScriptedModel m = new ScriptedModel(orders);
            if (ctx.rank() == 0) {
                models.add(m);
            }
            return m;
        }, FsdpTestSupport.SGD, t.seed, Device.CPU, FsdpTestSupport.RANK_BACKEND, UnaryOperator.identity())) {
            for (int s = 0; s < orders.size(); s++) {
                g.step(FsdpTestSupport.batch(t.tokens[s], t.targets[s]), 0.1f);
            }
        }
        assertEquals(1, models.size());
        return models.get(0);
    }

    @Test
    void theLastBlockStaysGatheredIntoItsBackward() {
        ScriptedModel m = run(1, List.of(List.of(1, 2, 3), List.of(1, 2, 3)));
        for (int pass = 0; pass < 2; pass++) {
            assertFalse(m.boundAfterForward.get(pass + ":1"), "b1 is freed after its forward");
            assertFalse(m.boundAfterForward.get(pass + ":2"), "b2 is freed after its forward");
            assertTrue(m.boundAfterForward.get(pass + ":3"), "b3, the last block, stays gathered for its backward");
        }
        assertTrue(m.mostGathered <= 2, "at most 1 + depth units gathered, saw " + m.mostGathered);
    }

    @Test
    void withoutPrefetchEveryBlockIsFreed() {
        ScriptedModel m = run(0, List.of(List.of(1, 2, 3)));
        for (int b = 1; b <= BLOCKS; b++) {
            assertFalse(m.boundAfterForward.get("0:" + b), "b" + b + " is freed after its forward at depth 0");
        }
        assertEquals(1, m.mostGathered, "one unit gathered at a time without prefetch");
    }

    @Test
    void aPassInAnotherOrderFreesTheKeptBlockBeforeTheNextRuns() {
        // pass 1 ends with b3, so pass 2 keeps b3 after its forward, but there b2 runs after it
        ScriptedModel m = run(1, List.of(List.of(1, 2, 3), List.of(1, 3, 2), List.of(1, 3, 2)));
        assertTrue(m.boundAfterForward.get("1:3"), "b3 was the last block of the pass before: kept");
        assertFalse(m.boundAfterForward.get("1:2"), "b2 was not the last block of the pass before: freed");
        assertEquals(0, m.othersBound.get("1:2"), "b3, kept, was freed when b2 ran after it");
        assertTrue(m.boundAfterForward.get("2:2"), "from the third pass on, b2 is the last block");
        assertTrue(m.mostGathered <= 2, "at most 1 + depth units gathered, saw " + m.mostGathered);
    }
}
