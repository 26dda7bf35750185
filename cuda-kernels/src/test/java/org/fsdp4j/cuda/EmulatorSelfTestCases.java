// Cases for the emulator's own kernels (src/test/emulator/selftest_kernels.cu): the intrinsics no
// production kernel uses yet, each against its definition in the CUDA Programming Guide and the
// PTX ISA (shfl.sync's segment clamping), so a kernel that starts using one finds it right.
package org.fsdp4j.cuda;

import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class EmulatorSelfTestCases {

    private EmulatorSelfTestCases() {
    }

    static List<EmuCase> cases(Random r) {
        return List.of(warp(), atomics());
    }

    private static EmuCase warp() {
        int blocks = 2, threads = 64;
        EmuCase c = new EmuCase("emu_selftest_warp_kernel", "2 blocks of 2 warps");
        Tensor out = c.device.allocate(DType.I32, (long) blocks * threads * 8);
        c.device.kernel("emu_selftest_warp_kernel").launch(null, blocks, threads, DeviceTensors.address(out));
        double[] want = new double[blocks * threads * 8];
        int ballot = 0;
        for (int l = 0; l < 32; l += 3) {
            ballot |= 1 << l;
        }
        for (int b = 0; b < blocks; b++) {
            for (int t = 0; t < threads; t++) {
                int lane = t & 31;
                int warpBase = 1000 * (t >> 5);
                int at = 8 * (b * threads + t);
                want[at] = warpBase + ((3 * lane + 1) & 31);
                want[at + 1] = warpBase + (lane >= 3 ? lane - 3 : lane);
                want[at + 2] = warpBase + (lane % 8 + 5 < 8 ? lane + 5 : lane);
                want[at + 3] = warpBase + (lane >= 16 ? lane - 16 : lane);
                want[at + 4] = ballot;
                want[at + 5] = 1;
                want[at + 6] = 1;
                want[at + 7] = 1000 * ((t ^ 1) >> 5) + ((t ^ 1) & 31);
            }
        }
        c.expectExact("out", out, want);
        return c;
    }

    private static EmuCase atomics() {
        int blocks = 3, threads = 64, n = blocks * threads;
        EmuCase c = new EmuCase("emu_selftest_atomics_kernel", "3 blocks of 64");
        Tensor counters = c.device.allocate(DType.I32, 6);
        Tensor sums = c.device.allocate(DType.F32, 1);
        c.device.putInts(counters, new int[] {0, -1, 0, -1, 0, 0});
        c.device.put(sums, new double[] {0});
        c.device.kernel("emu_selftest_atomics_kernel").launch(null, blocks, threads, DeviceTensors.address(counters),
                DeviceTensors.address(sums));
        c.expectExact("counters", counters, new double[] {n, n - 1, n - 1, 7, blocks, n});
        c.expectExact("sums", sums, new double[] {0.5 * n});
        return c;
    }
}
