// Each kind of collective runs on the stream docs/ARCHITECTURE.md gives it: all-gathers on the
// all-gather stream, reduce-scatters on the reduce-scatter stream, HYBRID_SHARD's all-reduce
// across replicas on an all-reduce stream of its own (so the next unit's reduce-scatter never
// queues behind a slow cross-node all-reduce), and only the step's one metrics all-reduce on the
// compute stream. A recording communicator notes the stream each collective is issued on.
package org.fsdp4j.fsdp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.UnaryOperator;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.comm.CommOp;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.ForwardingCommunicator;
import org.fsdp4j.model.GptModel;
import org.junit.jupiter.api.Test;

class FsdpStreamsTest {

    /** One collective call: which group, which operation, on which stream. */
    private record Call(String group, String op, String stream) {
    }

    /** Records each collective, and wraps the groups it splits off. */
    private static final class Recording extends ForwardingCommunicator {
        private final ConcurrentLinkedQueue<Call> calls;

        Recording(Communicator inner, ConcurrentLinkedQueue<Call> calls) {
            super(inner);
            this.calls = calls;
        }

        @Override
        protected void collective(CommOp op, Backend.Stream stream, Runnable call) {
            calls.add(new Call(inner.name(), op.label(), stream.name()));
            call.run();
        }

        @Override
        public Communicator split(int color, int key, String name) {
            return new Recording(inner.split(color, key, name), calls);
        }
    }

    /** "all-gather-r3" → "all-gather"; "compute" stays. */
    private static String kind(String stream) {
        int r = stream.lastIndexOf("-r");
        return r < 0 ? stream : stream.substring(0, r);
    }

    @Test
    void everyCollectiveRunsOnItsOwnStream() {
        FsdpTestSupport t = new FsdpTestSupport();
        ConcurrentLinkedQueue<Call> calls = new ConcurrentLinkedQueue<>();
        FsdpOptions c = FsdpTestSupport.config(4, ShardingStrategy.HYBRID_SHARD);   // shard groups of 2, 2 replicas
        UnaryOperator<Communicator> link = w -> new Recording(w, calls);
        try (LocalFsdpGroup g = new LocalFsdpGroup(c, ctx -> new GptModel(FsdpTestSupport.TINY, ctx.ops(), false),
                FsdpTestSupport.SGD, t.seed, org.fsdp4j.api.Device.CPU,
                FsdpTestSupport.RANK_BACKEND, link)) {
            calls.clear();   // only the step's calls
            g.step(FsdpTestSupport.batch(t.tokens[0], t.targets[0]), 0.1f);
        }
        // op → the streams it was issued on, e.g. "allReduce on replicate" → {all-reduce}
        Map<String, Set<String>> seen = new TreeMap<>();
        for (Call call : calls) {
            String axis = call.group().contains("replicate") ? "replicate" : call.group().contains("shard") ? "shard"
                    : "world";
            seen.computeIfAbsent(call.op() + " on " + axis, k -> new TreeSet<>()).add(kind(call.stream()));
        }
        assertEquals(Set.of("all-gather"), seen.get("allGather on shard"), seen.toString());
        assertEquals(Set.of("reduce-scatter"), seen.get("reduceScatter on shard"), seen.toString());
        assertEquals(Set.of("all-reduce"), seen.get("allReduce on replicate"), seen.toString());
        assertEquals(Set.of("compute"), seen.get("allReduce on world"), seen.toString());   // (loss, Σ grad²)
        assertFalse(seen.keySet().stream().anyMatch(k -> k.startsWith("broadcast") || k.startsWith("barrier")),
                seen.toString());
        assertEquals(4, seen.size(), seen.toString());
    }
}
