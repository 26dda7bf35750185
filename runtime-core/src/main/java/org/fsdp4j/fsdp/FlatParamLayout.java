// Where each parameter of a unit lives in its flat parameter: laid end to end in declaration
// order, each start aligned to 16 bytes of the param dtype (FSDP1's use_orig_params alignment,
// what vectorised GPU casts need), the whole padded to a multiple of the shard count and split
// in equal shards. Pure arithmetic: the same layout serves the fp32 master shard, the
// param-dtype all-gather buffers, the gradients and the checkpoint index.
//
//   flat (numel) = | p0 | pad | p1 | pad | ... | p_last | pad to a multiple of shardCount |
//   shard s      = flat[s · shardNumel, (s+1) · shardNumel)
package org.fsdp4j.fsdp;

import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.ParamSpec;
import org.fsdp4j.api.Tensor;

public final class FlatParamLayout {

    /** Every parameter starts on a multiple of this many bytes. */
    public static final int ALIGN_BYTES = 16;

    private final List<ParamSpec> params;
    private final DType paramDtype;
    private final int shardCount;
    private final long[] offsets;       // start of parameter i, in elements
    private final long numel;           // padded: a multiple of shardCount
    private final long unpaddedNumel;   // Σ parameter numel

    private FlatParamLayout(List<ParamSpec> params, DType paramDtype, int shardCount) {
        if (params.isEmpty()) {
            throw new IllegalArgumentException("a flat parameter needs at least one parameter");
        }
        if (shardCount < 1) {
            throw new IllegalArgumentException("shard count must be >= 1, got " + shardCount);
        }
        if (!paramDtype.isFloating()) {
            throw new IllegalArgumentException("param dtype must be floating, got " + paramDtype);
        }
        this.params = List.copyOf(params);
        this.paramDtype = paramDtype;
        this.shardCount = shardCount;
        this.offsets = new long[params.size()];
        long align = ALIGN_BYTES / paramDtype.byteSize();
        long end = 0;
        long sum = 0;
        for (int i = 0; i < params.size(); i++) {
            offsets[i] = roundUp(end, align);
            end = offsets[i] + params.get(i).numel();
            sum += params.get(i).numel();
        }
        this.numel = roundUp(end, shardCount);
        this.unpaddedNumel = sum;
    }

    public static FlatParamLayout of(List<ParamSpec> params, DType paramDtype, int shardCount) {
        return new FlatParamLayout(params, paramDtype, shardCount);
    }

    private static long roundUp(long x, long multiple) {
        return (x + multiple - 1) / multiple * multiple;
    }

    public List<ParamSpec> params() {
        return params;
    }

    public DType paramDtype() {
        return paramDtype;
    }

    public int shardCount() {
        return shardCount;
    }

    /** Elements of the whole flat parameter, padding included (P′ of this unit). */
    public long numel() {
        return numel;
    }

    /** Elements of the parameters themselves (P of this unit). */
    public long unpaddedNumel() {
        return unpaddedNumel;
    }

    /** Elements of each shard: numel / shardCount. */
    public long shardNumel() {
        return numel / shardCount;
    }

    /** Start of parameter {@code i} in the flat buffer, in elements. */
    public long offset(int i) {
        return offsets[i];
    }

    /** Parameter {@code i} as a view into a buffer laid out by this layout (gathered params or grads). */
    public Tensor view(Tensor flat, int i) {
        if (flat.numel() != numel) {
            throw new IllegalArgumentException("buffer of " + flat.numel() + " elements is not laid out by a layout of "
                    + numel);
        }
        return flat.view(offsets[i], params.get(i).shape());
    }

    /** Views of every parameter into {@code flat}, in declaration order. */
    public List<Tensor> views(Tensor flat) {
        List<Tensor> out = new ArrayList<>(params.size());
        for (int i = 0; i < params.size(); i++) {
            out.add(view(flat, i));
        }
        return out;
    }

    /** The parameters (parts of them) that shard {@code shard} holds, in flat order; padding is skipped. */
    public List<ShardSlice> slices(int shard) {
        if (shard < 0 || shard >= shardCount) {
            throw new IllegalArgumentException("shard " + shard + " is outside 0.." + (shardCount - 1));
        }
        long lo = shard * shardNumel();
        long hi = lo + shardNumel();
        List<ShardSlice> out = new ArrayList<>();
        for (int i = 0; i < params.size(); i++) {
            long start = Math.max(lo, offsets[i]);
            long end = Math.min(hi, offsets[i] + params.get(i).numel());
            if (start < end) {
                out.add(new ShardSlice(i, params.get(i), start - offsets[i], start - lo, end - start));
            }
        }
        return out;
    }

    @Override
    public String toString() {
        return "FlatParamLayout(" + params.size() + " params, " + unpaddedNumel + " → " + numel + " "
                + paramDtype.shortName() + " elements, " + shardCount + " shards of " + shardNumel() + ")";
    }
}
