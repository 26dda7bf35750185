// Launcher for swiglu.cu.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class SwigluLauncher {

    private final Kernel forward;
    private final Kernel backward;

    SwigluLauncher(KernelSource m) {
        forward = m.kernel("swiglu_forward_kernel");
        backward = m.kernel("swiglu_backward_kernel");
    }

    void forward(CudaStream s, Tensor gate, Tensor up, Tensor out) {
        long n = out.numel();
        forward.launchStrided(s, n, address(gate), code(gate), address(up), code(up), address(out), code(out), n);
    }

    void backward(CudaStream s, Tensor gate, Tensor up, Tensor dout, Tensor dgate, Tensor dup) {
        long n = gate.numel();
        backward.launchStrided(s, n, address(gate), code(gate), address(up), code(up), address(dout), code(dout),
                address(dgate), code(dgate), address(dup), code(dup), n);
    }
}
