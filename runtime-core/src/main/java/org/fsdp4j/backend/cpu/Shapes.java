// Argument checks shared by the CPU ops. Every failure is an IllegalArgumentException that
// names the op and prints the shapes involved, so a wrong call is fixed from the message.
package org.fsdp4j.backend.cpu;

import java.util.Arrays;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Tensor;

final class Shapes {

    private Shapes() {
    }

    static IllegalArgumentException error(String op, String problem, Tensor... tensors) {
        StringBuilder sb = new StringBuilder(op).append(": ").append(problem).append(" (");
        for (int i = 0; i < tensors.length; i++) {
            Tensor t = tensors[i];
            sb.append(i == 0 ? "" : ", ").append(t.dtype().shortName()).append(Arrays.toString(t.shape()));
        }
        return new IllegalArgumentException(sb.append(')').toString());
    }

    static void sameNumel(String op, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.numel() != tensors[0].numel()) {
                throw error(op, "element counts differ", tensors);
            }
        }
    }

    static void floating(String op, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (!t.dtype().isFloating()) {
                throw error(op, "expected floating tensors (fp32, fp16, bf16), got " + t.dtype().shortName(), tensors);
            }
        }
    }

    static void dtype(String op, DType expected, Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.dtype() != expected) {
                throw error(op, "expected " + expected.shortName() + " tensors", tensors);
            }
        }
    }

    static void rank(String op, int rank, Tensor t, String what) {
        if (t.rank() != rank) {
            throw error(op, what + " must have rank " + rank, t);
        }
    }

    /** Rows of a tensor viewed as (rows, cols) with cols = its last dim. */
    static long rows(Tensor t) {
        long cols = t.rank() == 0 ? 1 : t.dim(-1);
        return cols == 0 ? 0 : t.numel() / cols;
    }

    static int lastDim(Tensor t) {
        return t.rank() == 0 ? 1 : Math.toIntExact(t.dim(-1));
    }

    /** Items per chunk so that a chunk handles about {@code targetElements} elements of rows of {@code rowLength}. */
    static long rowsPerChunk(long rowLength, long targetElements) {
        return Math.max(1, targetElements / Math.max(1, rowLength));
    }
}
