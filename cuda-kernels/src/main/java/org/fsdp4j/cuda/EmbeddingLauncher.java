// Launcher for embedding.cu. The dwte backward needs a (V) int scratch of "token present"
// flags, zeroed here (with elementwise.cu's fill) before the mark kernel runs.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class EmbeddingLauncher {

    /** Must match EMB_THREADS in embedding.cu. */
    private static final int WTE_THREADS = 256;

    private final Kernel forward;
    private final Kernel backwardWpe;
    private final Kernel mark;
    private final Kernel backwardWte;
    private final Kernel fill;

    EmbeddingLauncher(KernelSource m) {
        forward = m.kernel("embedding_forward_kernel");
        backwardWpe = m.kernel("embedding_backward_wpe_kernel");
        mark = m.kernel("embedding_mark_kernel");
        backwardWte = m.kernel("embedding_backward_wte_kernel");
        fill = m.kernel("fill_kernel");
    }

    /** tokens (B, T) I32, wte (V, C), wpe (≥T, C) or null (no position embedding), out (B, T, C). */
    void forward(CudaStream s, Tensor tokens, Tensor wte, Tensor wpe, Tensor out, int b, int t, int c, int vocab) {
        long bt = (long) b * t;
        forward.launchStrided(s, bt * c, address(tokens), address(wte), code(wte), wpe == null ? 0L : address(wpe),
                wpe == null ? code(wte) : code(wpe), address(out), code(out), bt, t, c, vocab);
    }

    /** present: a (V) I32 scratch this call overwrites; dwpe null: no position embedding. */
    void backward(CudaStream s, Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe, Tensor present,
                  int b, int t, int c, int vocab) {
        long bt = (long) b * t;
        if (dwpe != null) {
            backwardWpe.launchStrided(s, (long) t * c, address(dout), code(dout), address(dwpe),
                    code(dwpe), b, t, c);
        }
        fill.launchStrided(s, vocab, address(present), code(present), (long) vocab, 0f);
        mark.launchStrided(s, bt, address(tokens), bt, vocab, address(present));
        backwardWte.launch(s, vocab, WTE_THREADS, address(tokens), address(present), address(dout), code(dout),
                address(dwte), code(dwte), bt, c);
    }
}
