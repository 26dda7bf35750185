// Launcher for crossentropy.cu: one block per row of logits.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class CrossEntropyLauncher {

    private static final int THREADS = 512;

    private final Kernel forward;
    private final Kernel backward;

    CrossEntropyLauncher(KernelSource m) {
        forward = m.kernel("cross_entropy_forward_kernel");
        backward = m.kernel("cross_entropy_backward_kernel");
    }

    /** logits (N, V), targets (N) I32, losses (N) F32. */
    void forward(CudaStream s, Tensor logits, Tensor targets, Tensor losses, long rows, int vocab) {
        forward.launch(s, rows, THREADS, address(logits), code(logits), address(targets), address(losses), rows, vocab);
    }

    void backward(CudaStream s, Tensor logits, Tensor targets, float dloss, Tensor dlogits, long rows, int vocab) {
        backward.launch(s, rows, THREADS, address(logits), code(logits), address(targets), dloss, address(dlogits),
                code(dlogits), rows, vocab);
    }
}
