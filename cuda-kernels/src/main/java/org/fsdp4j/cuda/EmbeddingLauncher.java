// Launcher for embedding.cu. The dwte backward groups the positions by token in an I32 scratch of
// scratchInts(B·T, V) values: counts then first slots (V+1), cursors (V), the grouped positions
// (B·T); the counts are zeroed here (with elementwise.cu's fill) before the count kernel runs.
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.DType;
import org.fsdp4j.api.Tensor;

final class EmbeddingLauncher {

    /** Must match EMB_THREADS in embedding.cu. */
    static final int THREADS = 256;

    private final Kernel forward;
    private final Kernel backwardWpe;
    private final Kernel count;
    private final Kernel scan;
    private final Kernel group;
    private final Kernel backwardWte;
    private final Kernel fill;

    EmbeddingLauncher(KernelSource m) {
        forward = m.kernel("embedding_forward_kernel");
        backwardWpe = m.kernel("embedding_backward_wpe_kernel");
        count = m.kernel("embedding_count_kernel");
        scan = m.kernel("embedding_scan_kernel");
        group = m.kernel("embedding_group_kernel");
        backwardWte = m.kernel("embedding_backward_wte_kernel");
        fill = m.kernel("fill_kernel");
    }

    /** I32 values of the backward's scratch for bt positions and a vocabulary of {@code vocab}. */
    static long scratchInts(long bt, int vocab) {
        return 2L * vocab + 1 + bt;
    }

    /** tokens (B, T) I32, wte (V, C), wpe (≥T, C) or null (no position embedding), out (B, T, C). */
    void forward(CudaStream s, Tensor tokens, Tensor wte, Tensor wpe, Tensor out, int b, int t, int c, int vocab) {
        long bt = (long) b * t;
        forward.launchStrided(s, bt * c, address(tokens), address(wte), code(wte), wpe == null ? 0L : address(wpe),
                wpe == null ? code(wte) : code(wpe), address(out), code(out), bt, t, c, vocab);
    }

    /** scratch: at least scratchInts(B·T, V) I32 values this call overwrites; dwpe null: no position embedding. */
    void backward(CudaStream s, Tensor tokens, Tensor dout, Tensor dwte, Tensor dwpe, Tensor scratch,
                  int b, int t, int c, int vocab) {
        long bt = (long) b * t;
        if (scratch.dtype() != DType.I32 || scratch.numel() < scratchInts(bt, vocab)) {
            throw new IllegalArgumentException("embeddingBackward: the scratch holds " + scratch.numel() + " "
                    + scratch.dtype() + " values, needs " + scratchInts(bt, vocab) + " I32");
        }
        if (dwpe != null) {
            backwardWpe.launchStrided(s, (long) t * c, address(dout), code(dout), address(dwpe),
                    code(dwpe), b, t, c);
        }
        long counts = address(scratch);                  // (V+1): counts, then each token's first slot
        long cursor = counts + 4L * (vocab + 1);         // (V)
        long order = cursor + 4L * vocab;                // (B·T)
        fill.launchStrided(s, vocab + 1L, counts, code(scratch), vocab + 1L, 0f);
        count.launchStrided(s, bt, address(tokens), bt, vocab, counts);
        scan.launch(s, 1, THREADS, counts, vocab + 1, cursor);
        group.launch(s, 1, THREADS, address(tokens), bt, vocab, cursor, order);
        backwardWte.launch(s, vocab, THREADS, counts, order, address(dout), code(dout), address(dwte), code(dwte), c);
    }
}
