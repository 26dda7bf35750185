// The fourth planted fault: two ranks issue their collectives in different orders (rank 0 an
// all-reduce then an all-gather, rank 1 the other way round). Real NCCL would match rank 0's
// all-reduce with rank 1's all-gather, mixing buffers or hanging; the stand-in NCCL refuses the
// collective that does not match (ncclInvalidUsage), NcclCommunicator aborts the group, and the
// ranks end with one error naming both calls, at once rather than after a timeout. Also: the
// same two ranks in the same order exchange the right data. Fake-GPU run only (tag "standin"):
// ranks on the two stand-in devices.
package org.fsdp4j.nccl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.comm.Communicator;
import org.fsdp4j.comm.LocalLauncher;
import org.fsdp4j.comm.Reduction;
import org.fsdp4j.cuda.CudaProbe;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("standin")
class StandInNcclOrderTest {

    private static final int N = 64;

    /** What rank r issues on its compute stream, given its backend, communicator, x (N) and gathered (2N). */
    @FunctionalInterface
    private interface Collectives {
        void issue(int rank, Backend be, Communicator c, Tensor x, Tensor gathered);
    }

    private static List<float[]> run(Collectives collectives) {
        CudaProbe.Result probe = StandIns.assumeStandIns();
        assumeTrue(probe.deviceCount() >= 2, "needs two stand-in devices: " + probe.describe());
        NcclGroup group = NcclGroup.create(2, Duration.ofSeconds(30));
        return LocalLauncher.run(group, r -> {
            try (Backend be = Backends.create(Device.cuda(r), new MemoryTracker("rank " + r), new BackendOptions(1, false));
                 Communicator c = group.communicator(r, be);
                 Tensor x = be.allocate(DType.F32, MemoryCategory.WORKSPACE, N);
                 Tensor gathered = be.zeros(DType.F32, MemoryCategory.WORKSPACE, 2 * N)) {
                float[] mine = new float[N];
                Arrays.fill(mine, r + 1);
                be.copyFromHost(mine, 0, x);
                collectives.issue(r, be, c, x, gathered);
                float[] out = new float[3 * N];
                be.copyToHost(x, out, 0);
                be.copyToHost(gathered, out, N);
                return out;
            }
        });
    }

    @Test
    void theSameOrderOnEveryRankExchangesTheData() {
        List<float[]> out = run((r, be, c, x, g) -> {
            c.allReduce(x, Reduction.SUM, be.computeStream());
            c.allGather(x, g, be.computeStream());
        });
        float[] want = new float[3 * N];
        Arrays.fill(want, 3f);   // 1 + 2 everywhere: the sum, then both ranks' copies of it
        assertArrayEquals(want, out.get(0));
        assertArrayEquals(want, out.get(1));
    }

    @Test
    void aCollectiveIssuedInADifferentOrderOnTwoRanksFailsTheRun() {
        long start = System.nanoTime();
        LocalLauncher.RanksFailedException e = assertThrows(LocalLauncher.RanksFailedException.class, () -> run(
                (r, be, c, x, g) -> {
                    if (r == 0) {
                        c.allReduce(x, Reduction.SUM, be.computeStream());
                        c.allGather(x, g, be.computeStream());
                    } else {
                        c.allGather(x, g, be.computeStream());
                        c.allReduce(x, Reduction.SUM, be.computeStream());
                    }
                    be.synchronize();
                }));
        double seconds = (System.nanoTime() - start) / 1e9;
        String m = e.getMessage();
        System.out.println("collectives out of order (" + String.format("%.1f", seconds) + " s): " + m);
        assertTrue(m.contains("AllGather") && m.contains("AllReduce") && m.contains("same order"), m);
        assertTrue(seconds < 20, "failed at once, not after the collective timeout: " + seconds + " s");
    }
}
