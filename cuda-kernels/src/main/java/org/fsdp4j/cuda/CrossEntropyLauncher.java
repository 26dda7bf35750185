// Launcher for crossentropy.cu: one block per row of logits, as many warps as cover the row, at
// most 512 threads (GPT-2's 50,257-wide rows: each thread sums ~100 terms before the block's
// reductions; a 37-wide test vocabulary: two warps, not 16 warps of mostly idle threads).
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class CrossEntropyLauncher {

    /** The most threads per block. */
    static final int MAX_THREADS = 512;

    private final Kernel forward;
    private final Kernel backward;

    CrossEntropyLauncher(KernelSource m) {
        forward = m.kernel("cross_entropy_forward_kernel");
        backward = m.kernel("cross_entropy_backward_kernel");
    }

    /** Threads per block for rows of {@code vocab}: whole warps covering the row, at most MAX_THREADS. */
    static int threads(int vocab) {
        return (int) Math.min(MAX_THREADS, Math.max(32, Grid.ceilDiv(vocab, 32) * 32));
    }

    /** logits (N, V), targets (N) I32, losses (N) F32. */
    void forward(CudaStream s, Tensor logits, Tensor targets, Tensor losses, long rows, int vocab) {
        forward.launch(s, rows, threads(vocab), address(logits), code(logits), address(targets), address(losses), rows,
                vocab);
    }

    void backward(CudaStream s, Tensor logits, Tensor targets, float dloss, Tensor dlogits, long rows, int vocab) {
        backward.launch(s, rows, threads(vocab), address(logits), code(logits), address(targets), dloss,
                address(dlogits), code(dlogits), rows, vocab);
    }
}
