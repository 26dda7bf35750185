// The rule that keeps a rank's several NCCL communicators from deadlocking on its GPU (nccl-comm's
// IssueOrder), on the stand-ins with one NCCL kernel slot per GPU (FSDP4J_STANDIN_NCCL_SLOTS=1: a
// GPU runs one collective at a time, the harshest case of spinning kernels holding its SMs, where
// two GPUs that start two communicators' collectives in different orders wait for each other
// forever; the stand-in NCCL's own test shows that deadlock). Under both forms of the rule, NCCL's
// implicit launch order (NCCL_LAUNCH_ORDER_IMPLICIT=1: the stand-in gives the slot in host issue
// order) and the chained streams (each collective after the rank's previous one), two ranks on two
// stand-in GPUs train hybrid_shard's three communicators (all-gather, reduce-scatter, all-reduce) to
// the same losses as with no slot limit, with random delays on every stream. (With the rule
// switched off, -Dfsdp4j.ncclIssueOrder=unordered, these runs happened to finish too: the engine's
// own waits order most of its collectives; the deadlock the rule rules out is shown on the stand-in
// NCCL directly, StandInNcclProcessesTest.) Fake-GPU run only.
package org.fsdp4j.cli;

import static org.fsdp4j.cli.MultiProcessCommandTest.losses;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("standin")
class GpuCollectiveOrderTest {

    private static final List<String> RUN = List.of("train", "--device", "cuda", "--world-size", "4", "--strategy",
            "hybrid_shard", "--shard-group-size", "2", "--preset", "tiny", "--batch-size", "4", "--seq-len", "32",
            "--steps", "3");

    @TempDir
    Path dir;

    private float[] train(String name, Map<String, String> env, List<String> jvm) throws Exception {
        Map<String, String> all = new HashMap<>(env);
        all.put("FSDP4J_STANDIN_DEVICES", "4");
        all.put("FSDP4J_STANDIN_JITTER", "1");
        all.put("FSDP4J_STANDIN_NCCL_TIMEOUT_S", "60");      // a deadlock fails the run, not the build's patience
        List<String> args = new ArrayList<>(RUN);
        args.addAll(List.of("--out", dir.resolve(name).toString(), "--collective-timeout", "90"));
        List<String> flags = new ArrayList<>();
        for (String p : List.of("org.bytedeco.javacpp.platform.linkpath", "org.bytedeco.javacpp.cachedir",
                StandIns.PROPERTY)) {
            flags.add("-D" + p + "=" + System.getProperty(p));
        }
        flags.add("-Xss4m");
        flags.addAll(jvm);
        ChildJvm c = ChildJvm.start(dir.resolve(name + ".err"), all, flags, args);
        assertEquals(0, c.exit(300), name + ": " + c.stderr());
        return losses(dir.resolve(name).resolve("summary.json"));
    }

    @Test
    void oneKernelSlotPerGpuTrainsUnderEitherFormOfTheRule() throws Exception {
        StandIns.assumeStandIns();
        float[] free = train("no-slot-limit", Map.of(), List.of());
        float[] implicit = train("implicit-order", Map.of("FSDP4J_STANDIN_NCCL_SLOTS", "1", "NCCL_LAUNCH_ORDER_IMPLICIT",
                "1"), List.of("-Dfsdp4j.ncclIssueOrder=implicit"));
        float[] chained = train("chained", Map.of("FSDP4J_STANDIN_NCCL_SLOTS", "1"),
                List.of("-Dfsdp4j.ncclIssueOrder=chained"));
        assertArrayEquals(free, implicit, "NCCL's implicit launch order, one slot per GPU");
        assertArrayEquals(free, chained, "chained streams, one slot per GPU");
    }
}
