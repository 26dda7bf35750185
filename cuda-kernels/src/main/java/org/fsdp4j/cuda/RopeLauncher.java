// Launcher for rope.cu: one grid-stride kernel, forward (sign +1) and backward (−1, the inverse turn).
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class RopeLauncher {

    private final Kernel rope;

    RopeLauncher(KernelSource m) {
        rope = m.kernel("rope_kernel");
    }

    /** inp, out (rows = B·H·T, 2·half), out may be inp; cos, sin (≥ T, half) F32; sign +1 forward, −1 backward. */
    void rope(CudaStream s, Tensor inp, Tensor cos, Tensor sin, Tensor out, long rows, int t, int half, float sign) {
        rope.launchStrided(s, rows * half, address(inp), code(inp), address(cos), address(sin), address(out),
                code(out), rows, t, half, sign);
    }
}
