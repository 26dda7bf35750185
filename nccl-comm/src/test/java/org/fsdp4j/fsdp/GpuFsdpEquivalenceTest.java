// The FSDP engine on GPUs equals the unsharded CPU reference, the same comparison as the CPU's
// FsdpEquivalenceTest: every strategy, N = 2, 3, 4 ranks sharing one GPU (the in-process group
// trading stream events) and N = 1 through NCCL (the GPU machine has one GPU; NCCL between two
// GPUs needs a machine with two); and the Llama at N = 2 and 4 on one GPU (LlamaFsdpEquivalenceTest's).
// Needs a GPU (and NCCL for the NCCL cases); skipped with the probe's reason where there is none.
package org.fsdp4j.fsdp;

import static org.fsdp4j.fsdp.FsdpTestSupport.SGD;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import org.fsdp4j.comm.LocalGroup;
import org.fsdp4j.cuda.CudaProbe;
import org.fsdp4j.nccl.NcclGroup;
import org.fsdp4j.tensor.Device;
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

    private static void assumeGpu() {
        CudaProbe.Result probe = CudaProbe.probe();
        assumeTrue(probe.usable(), () -> "no usable GPU: " + probe.unavailableReason().orElse(""));
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
                FsdpConfig config = FsdpTestSupport.config(n, strategy);
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
                FsdpConfig config = FsdpTestSupport.config(n, strategy);
                t.assertMatches("cuda:0 llama " + strategy.cliName() + " N=" + n, ref, t.sharded(config, SGD, false),
                        GPU_FP32);
            }
        }
    }

    @Test
    @Tag("gpu")
    void ncclRanksMatchTheReference() {
        assumeGpu();
        FsdpTestSupport t = new FsdpTestSupport(Device.cuda(0), n -> NcclGroup.create(n, Duration.ofSeconds(60)));
        FsdpTestSupport.Trajectory ref = t.reference(SGD, 0f);
        for (ShardingStrategy strategy : ShardingStrategy.values()) {
            FsdpConfig config = FsdpTestSupport.config(1, strategy);
            t.assertMatches("NCCL " + strategy.cliName() + " N=1", ref, t.sharded(config, SGD, false), GPU_FP32);
        }
    }
}
