// The FSDP engine on GPUs equals the unsharded CPU reference, the same comparison as the CPU's
// FsdpEquivalenceTest: every strategy, N = 2, 3, 4 ranks sharing one GPU (the in-process group
// trading stream events) and through NCCL N = 1 and, where there are that many devices (the
// stand-ins of nccl-comm's fake-GPU run report four), N = 2 and 4 with rank r on cuda:r; and
// the Llama at N = 2 and 4 on one GPU (LlamaFsdpEquivalenceTest's).
// Needs a GPU or the stand-ins (and NCCL for the NCCL cases); skipped with the reason otherwise.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;

import java.time.Duration;
import java.util.List;
import java.util.stream.IntStream;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.ShardingStrategy;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.cuda.CudaProbe;
import org.fsdp4j.cuda.StandIns;
import org.fsdp4j.nccl.NcclGroup;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

class GpuFsdpEquivalenceTest {

    /**
     * fp32 on a GPU: cuBLAS and our kernels sum in other orders than the CPU reference (TF32 stays
     * off by default), so each value differs by fp32 roundings of its terms; over 5 SGD steps at
     * lr 0.5 that stays within the CPU tolerance's 1e-5 in most runs, 1e-4 leaves room for GEMM
     * orders. A sharding bug is an O(1) error.
     */
    static final FsdpTestSupport.Tolerance GPU_FP32 = new FsdpTestSupport.Tolerance(1e-4, 1e-4, 1e-4);

    private static CudaProbe.Result assumeGpu() {
        return StandIns.assumeGpu();
    }

    @Test
    @Tag("gpu")
    void ranksSharingOneGpuMatchTheReference() {
        assumeGpu();
        FsdpTestSupport t = new FsdpTestSupport(Device.cuda(0),
                n -> new LocalGroup(n, Duration.ofSeconds(60), LocalGroup.Dispatch.STREAM_EVENTS));
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (ShardingStrategy strategy : ShardingStrategy.values()) {
            for (int n : new int[] {2, 3, 4}) {
                FsdpOptions config = FsdpTestSupport.config(n, strategy);
                t.assertMatches("cuda:0 " + strategy.cliName() + " N=" + n, ref, t.sharded(config, SGD, false), GPU_FP32);
            }
        }
    }

    @Test
    @Tag("gpu")
    void llamaRanksSharingOneGpuMatchTheReference() {
        assumeGpu();
        FsdpTestSupport t = new FsdpTestSupport(FsdpTestSupport.TINY_LLAMA, Device.cuda(0),
                n -> new LocalGroup(n, Duration.ofSeconds(60), LocalGroup.Dispatch.STREAM_EVENTS));
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (ShardingStrategy strategy : ShardingStrategy.values()) {
            for (int n : new int[] {2, 4}) {
                FsdpOptions config = FsdpTestSupport.config(n, strategy);
                t.assertMatches("cuda:0 llama " + strategy.cliName() + " N=" + n, ref, t.sharded(config, SGD, false),
                        GPU_FP32);
            }
        }
    }

    @Test
    @Tag("gpu")
    void ncclRanksMatchTheReference() {
        int devices = assumeGpu().deviceCount();
        FsdpTestSupport t = new FsdpTestSupport(n -> IntStream.range(0, n).mapToObj(Device::cuda).toList(),
                n -> NcclGroup.create(n, Duration.ofSeconds(60)));
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (int n : new int[] {1, 2, 4}) {
            if (n > devices) {
                continue;
            }
            // N = 1 is one path whatever the strategy: once, where larger groups run every strategy
            for (ShardingStrategy strategy : n == 1 && devices > 1 ? List.of(ShardingStrategy.FULL_SHARD)
                    : List.of(ShardingStrategy.values())) {
                FsdpOptions config = FsdpTestSupport.config(n, strategy);
                t.assertMatches("NCCL " + strategy.cliName() + " N=" + n, ref, t.sharded(config, SGD, false), GPU_FP32);
            }
        }
    }
}
