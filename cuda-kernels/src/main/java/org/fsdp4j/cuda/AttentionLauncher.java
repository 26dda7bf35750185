// Launcher for attention.cu: head split (grouped-query too) and merge, and the causal softmax (one warp per row).
package org.fsdp4j.cuda;

import static org.fsdp4j.cuda.DeviceTensors.address;
import static org.fsdp4j.cuda.DeviceTensors.code;

import org.fsdp4j.api.Tensor;

final class AttentionLauncher {

    private final Kernel split;
    private final Kernel splitBackward;
    private final Kernel merge;
    private final Kernel mergeBackward;
    private final Kernel softmaxForward;
    private final Kernel softmaxBackward;

    AttentionLauncher(KernelSource m) {
        split = m.kernel("split_heads_kernel");
        splitBackward = m.kernel("split_heads_backward_kernel");
        merge = m.kernel("merge_heads_kernel");
        mergeBackward = m.kernel("merge_heads_backward_kernel");
        softmaxForward = m.kernel("causal_softmax_forward_kernel");
        softmaxBackward = m.kernel("causal_softmax_backward_kernel");
    }

    /** qkv (B, T, (H + 2·Hkv)·D) → q (B, H, T, D), k, v (B, Hkv, T, D), all three of one dtype. */
    // The head copies walk the token-major side row by row (common.cuh, FOR_ROWS): grid x
    // over a row's columns, grid y over the B·T rows.

    void splitHeads(CudaStream s, Tensor qkv, Tensor q, Tensor k, Tensor v, int b, int t, int h, int hkv, int d) {
        split.launch2d(s, Grid.rowColumns((long) (h + 2 * hkv) * d), Grid.rows((long) b * t), Grid.THREADS, 1, 0,
                address(qkv), code(qkv), address(q), address(k), address(v), code(q), b, t, h, hkv, d);
    }

    void splitHeadsBackward(CudaStream s, Tensor dq, Tensor dk, Tensor dv, Tensor dqkv, int b, int t, int h, int hkv,
                            int d) {
        splitBackward.launch2d(s, Grid.rowColumns((long) (h + 2 * hkv) * d), Grid.rows((long) b * t), Grid.THREADS, 1,
                0, address(dq), address(dk), address(dv), code(dq), address(dqkv), code(dqkv), b, t, h, hkv, d);
    }

    /** y (B, H, T, D) → out (B, T, H·D). */
    void mergeHeads(CudaStream s, Tensor y, Tensor out, int b, int t, int h, int d) {
        merge.launch2d(s, Grid.rowColumns((long) h * d), Grid.rows((long) b * t), Grid.THREADS, 1, 0, address(y),
                code(y), address(out), code(out), b, t, h, d);
    }

    void mergeHeadsBackward(CudaStream s, Tensor dout, Tensor dy, int b, int t, int h, int d) {
        mergeBackward.launch2d(s, Grid.rowColumns((long) h * d), Grid.rows((long) b * t), Grid.THREADS, 1, 0,
                address(dout), code(dout), address(dy), code(dy), b, t, h, d);
    }

    /** preatt, att (rows = B·H·T, T). */
    void causalSoftmaxForward(CudaStream s, Tensor preatt, Tensor att, long rows, int t, float scale) {
        softmaxForward.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(preatt), code(preatt), address(att),
                code(att), rows, t, scale);
    }

    void causalSoftmaxBackward(CudaStream s, Tensor att, Tensor datt, Tensor dpreatt, long rows, int t, float scale) {
        softmaxBackward.launch(s, Grid.warpPerRow(rows), Grid.THREADS, address(att), code(att), address(datt),
                code(datt), address(dpreatt), code(dpreatt), rows, t, scale);
    }
}
