// Launcher for gelu.cu.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class GeluLauncher {

    private final Kernel forward;
    private final Kernel backward;

    GeluLauncher(KernelSource m) {
        forward = m.kernel("gelu_forward_kernel");
        backward = m.kernel("gelu_backward_kernel");
    }

    void forward(CudaStream s, Tensor inp, Tensor out) {
        long n = inp.numel();
        forward.launchStrided(s, n, address(inp), code(inp), address(out), code(out), n);
    }

    void backward(CudaStream s, Tensor inp, Tensor dout, Tensor dinp) {
        long n = inp.numel();
        backward.launchStrided(s, n, address(inp), code(inp), address(dout), code(dout),
                address(dinp), code(dinp), n);
    }
}
