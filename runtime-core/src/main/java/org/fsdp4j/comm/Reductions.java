// The one reduction arithmetic of the CPU communicators, in-process and across processes alike:
// the members' buffers summed in fp32 in member order 0..N−1 (whatever order they arrived in),
// multiplied once by the reduction's factor, rounded once to each destination's dtype. Sharing
// it is what makes a run of 2 processes × 2 ranks reduce to the very bits 4 in-process ranks do.
package org.fsdp4j.comm;

import java.util.Arrays;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;

final class Reductions {

    private Reductions() {
    }

    /**
     * destinations[i] = reduction over a group of {@code groupSize} of sources[0..][offset, offset+n),
     * summed in fp32 in source order and rounded once to each destination's dtype; backend ops,
     * issued on the calling thread's stream (or run at once inside stream work).
     */
    static void reduceInto(Backend backend, int groupSize, Tensor[] sources, long offset, long n, Reduction reduction,
                           List<Tensor> destinations) {
        if (n == 0) {
            return;
        }
        boolean accumulateInPlace = destinations.size() == 1 && destinations.get(0).dtype() == DType.F32
                && Arrays.stream(sources).noneMatch(s -> CollectiveChecks.overlaps(s, destinations.get(0)));
        Tensor acc = accumulateInPlace ? destinations.get(0) : backend.allocate(DType.F32, MemoryCategory.WORKSPACE, n);
        try {
            // acc = s0 + s1 in one pass (the bits of copying s0 and adding s1: both widen exactly and add
            // in fp32), then + s2, ...; the factor is applied in the pass that adds the last member
            float scale = (float) reduction.scaleAfterSum(groupSize);
            if (sources.length == 1) {
                backend.copy(chunk(sources[0], offset, n), acc);
                if (scale != 1f) {
                    backend.scale(acc, scale);
                }
            }
            for (int q = 1; q < sources.length; q++) {
                Tensor sum = q == 1 ? chunk(sources[0], offset, n) : acc;
                Tensor member = chunk(sources[q], offset, n);
                if (q == sources.length - 1 && scale != 1f) {
                    backend.addScaled(sum, member, scale, acc);
                } else {
                    backend.add(sum, member, acc);
                }
            }
            for (Tensor d : destinations) {
                if (d != acc) {
                    backend.copy(acc, d);
                }
            }
        } finally {
            if (!accumulateInPlace) {
                acc.close();
            }
        }
    }

    /** Elements [offset, offset + n) of t, flattened. */
    private static Tensor chunk(Tensor t, long offset, long n) {
        return t.reshape(t.numel()).view(offset, n);
    }
}
