// What the emulator cases of the column-sum kernels (bias, LayerNorm and RMSNorm parameter
// gradients) share: the plan with a given number of row chunks (ColumnSums), the kernels such a
// case is about, and the reference's summation depth.
package org.fsdp4j.cuda;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;

final class ColumnSumCases {

    private ColumnSumCases() {
    }

    /** The case's plan: {@code chunks} row chunks, the partials in the case's device memory. */
    static ColumnSums.Plan plan(EmuCase c, long rows, int cols, int k, int chunks) {
        return ColumnSums.plan(rows, cols, k, chunks, n -> c.device.allocate(DType.F32, n));
    }

    /** The subject kernels, plus column_partials_kernel where several chunks need it. */
    static List<String> subjects(List<String> kernels, int chunks) {
        List<String> all = new ArrayList<>(kernels);
        if (chunks > 1) {
            all.add("column_partials_kernel");
        }
        return all;
    }

    static List<String> subjects(String kernel, int chunks) {
        return subjects(List.of(kernel), chunks);
    }

    static String label(int chunks) {
        return chunks > 1 ? ", " + chunks + " row chunks" : "";
    }

    /**
     * Additions a term passes at most: its row-thread's share of its chunk (⌈rows per chunk / 16⌉),
     * the block's 16 partials, the chunks in order, then the accumulate into the output.
     */
    static long depth(long rows, int chunks) {
        long perChunk = chunks > 1 ? (rows + chunks - 1) / chunks : rows;
        long perThread = (perChunk + ColumnSums.TY - 1) / ColumnSums.TY;
        return perThread + ColumnSums.TY + (chunks > 1 ? chunks : 0) + 1;
    }
}
