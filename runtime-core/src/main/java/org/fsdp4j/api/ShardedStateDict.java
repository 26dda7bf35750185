// The training state as the ranks hold it, copied to the host: every rank's shard of every
// unit's flat buffers (fp32 master, AdamW's two moments) with the slices that say which
// parameter elements each shard holds, and the optimizer's progress. What a checkpoint writes;
// as a StateSource it re-slices by parameter name and element range, so it loads at any world
// size or strategy.
package org.fsdp4j.api;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The training state as the ranks hold it, on the host: for every rank of this process and
 * every unit, the rank's shard of each buffer ({@link #PARAM}, the fp32 master, then AdamW's
 * {@link #EXP_AVG} and {@link #EXP_AVG_SQ}) and the {@link Slice}s that map shard elements to
 * parameter elements; plus the optimizer's {@link Progress}. As a {@link StateSource} it answers
 * any element range of any parameter, so it loads into a model sharded another way.
 */
public final class ShardedStateDict implements StateSource {

    /** The fp32 master parameters' buffer name. */
    public static final String PARAM = "param";
    /** AdamW's first moment. */
    public static final String EXP_AVG = "exp_avg";
    /** AdamW's second moment. */
    public static final String EXP_AVG_SQ = "exp_avg_sq";

    /**
     * How far the optimizer has come.
     *
     * @param optimizerSteps     updates applied so far (AdamW's bias correction counts them)
     * @param lossScale          the loss scale (1 without fp16)
     * @param lossScaleGoodSteps finite steps since the scale last changed
     */
    public record Progress(int optimizerSteps, float lossScale, int lossScaleGoodSteps) {

        /** A fresh optimizer: no steps, loss scale 1. */
        public static final Progress FRESH = new Progress(0, 1f, 0);

        /**
         * Checks the values.
         *
         * @param optimizerSteps     updates applied so far (AdamW's bias correction counts them)
         * @param lossScale          the loss scale (1 without fp16)
         * @param lossScaleGoodSteps finite steps since the scale last changed
         * @throws IllegalArgumentException if a count is negative or the scale is not a positive number
         */
        public Progress {
            if (optimizerSteps < 0 || lossScaleGoodSteps < 0 || !(lossScale > 0) || !Float.isFinite(lossScale)) {
                throw new IllegalArgumentException("optimizer progress needs steps >= 0 and a positive loss scale, got "
                        + optimizerSteps + ", " + lossScale + ", " + lossScaleGoodSteps);
            }
        }
    }

    /**
     * Where some elements of one parameter sit in a shard.
     *
     * @param param       the parameter's name
     * @param shape       the parameter's full shape
     * @param paramOffset the first element of the parameter (row-major) in this slice
     * @param shardOffset where that element sits in the shard's buffers
     * @param numel       elements in the slice
     */
    public record Slice(String param, long[] shape, long paramOffset, int shardOffset, int numel) {

        /**
         * Copies the shape.
         *
         * @param param       the parameter's name
         * @param shape       the parameter's full shape
         * @param paramOffset the first element of the parameter (row-major) in this slice
         * @param shardOffset where that element sits in the shard's buffers
         * @param numel       elements in the slice
         */
        public Slice {
            shape = shape.clone();
        }

        /**
         * The parameter's full shape.
         *
         * @return a copy
         */
        @Override
        public long[] shape() {
            return shape.clone();
        }
    }

    /**
     * One rank's shard of one unit.
     *
     * @param unit    the unit's name
     * @param slices  which parameter elements the shard holds, in shard order
     * @param buffers one array per buffer name, all of the shard's length (padding elements are 0)
     */
    public record UnitShard(String unit, List<Slice> slices, List<float[]> buffers) {

        /**
         * Copies the lists (not the arrays).
         *
         * @param unit    the unit's name
         * @param slices  which parameter elements the shard holds, in shard order
         * @param buffers one array per buffer name, all of the shard's length (padding elements
         *                are 0)
         */
        public UnitShard {
            slices = List.copyOf(slices);
            buffers = List.copyOf(buffers);
        }
    }

    /**
     * What one rank holds.
     *
     * @param worldRank    the rank
     * @param shardIndex   which shard of every unit it holds (its place in its shard group)
     * @param replicaIndex which copy of the shards it belongs to (0 unless shards are replicated)
     * @param units        its shard of every unit, in unit order
     */
    public record RankShard(int worldRank, int shardIndex, int replicaIndex, List<UnitShard> units) {

        /**
         * Copies the list.
         *
         * @param worldRank    the rank
         * @param shardIndex   which shard of every unit it holds (its place in its shard group)
         * @param replicaIndex which copy of the shards it belongs to (0 unless shards are
         *                     replicated)
         * @param units        its shard of every unit, in unit order
         */
        public RankShard {
            units = List.copyOf(units);
        }
    }

    private record Piece(Slice slice, float[][] buffers) {
    }

    private final List<String> bufferNames;
    private final Progress progress;
    private final List<RankShard> ranks;
    private final Map<String, List<Piece>> byParam = new LinkedHashMap<>();   // replica 0's pieces, shard order

    /**
     * A state dict of these shards.
     *
     * @param bufferNames the buffers every unit shard holds, in order ({@link #PARAM} first)
     * @param progress    the optimizer's progress
     * @param ranks       the ranks' shards
     * @throws IllegalArgumentException if a unit shard's buffers do not match the names
     */
    public ShardedStateDict(List<String> bufferNames, Progress progress, List<RankShard> ranks) {
        this.bufferNames = List.copyOf(bufferNames);
        this.progress = progress;
        this.ranks = List.copyOf(ranks);
        if (this.bufferNames.isEmpty() || !this.bufferNames.get(0).equals(PARAM)) {
            throw new IllegalArgumentException("a sharded state dict's first buffer is '" + PARAM + "', got " + bufferNames);
        }
        for (RankShard r : this.ranks) {
            for (UnitShard u : r.units()) {
                if (u.buffers().size() != this.bufferNames.size()) {
                    throw new IllegalArgumentException("unit " + u.unit() + " of rank " + r.worldRank() + " holds "
                            + u.buffers().size() + " buffers, not " + this.bufferNames.size());
                }
                if (r.replicaIndex() != 0) {
                    continue;
                }
                float[][] bufs = u.buffers().toArray(new float[0][]);
                for (Slice s : u.slices()) {
                    byParam.computeIfAbsent(s.param(), k -> new ArrayList<>()).add(new Piece(s, bufs));
                }
            }
        }
        byParam.values().forEach(l -> l.sort((a, b) -> Long.compare(a.slice.paramOffset(), b.slice.paramOffset())));
    }

    /**
     * The buffers every unit shard holds, in order: {@link #PARAM}, then the optimizer's.
     *
     * @return the names
     */
    public List<String> bufferNames() {
        return bufferNames;
    }

    /**
     * How far the optimizer has come.
     *
     * @return the progress
     */
    public Progress progress() {
        return progress;
    }

    /**
     * Every rank's shards (the ranks of the process that made it), in rank order.
     *
     * @return the shards
     */
    public List<RankShard> ranks() {
        return ranks;
    }

    /**
     * Every parameter's name and full shape, in model order.
     *
     * @return name to shape
     */
    public Map<String, long[]> shapes() {
        Map<String, long[]> out = new LinkedHashMap<>();
        for (RankShard r : ranks) {
            for (UnitShard u : r.units()) {
                for (Slice s : u.slices()) {
                    out.putIfAbsent(s.param(), s.shape());
                }
            }
        }
        return out;
    }

    @Override
    public void read(String param, String buffer, long start, float[] out, int offset, int count) {
        int b = bufferNames.indexOf(buffer);
        if (b < 0) {
            throw new IllegalArgumentException("the state holds buffers " + bufferNames + ", not '" + buffer + "'");
        }
        List<Piece> pieces = byParam.get(param);
        if (pieces == null) {
            throw new IllegalArgumentException("the state holds no parameter '" + param + "'");
        }
        long end = start + count;
        long covered = start;   // [start, covered) is copied; pieces are sorted by offset and disjoint
        for (Piece p : pieces) {
            long pieceStart = p.slice.paramOffset();
            long pieceEnd = pieceStart + p.slice.numel();
            if (covered == end || pieceStart > covered) {
                break;
            }
            if (pieceEnd <= covered) {
                continue;
            }
            long to = Math.min(end, pieceEnd);
            int src = Math.toIntExact(p.slice.shardOffset() + (covered - pieceStart));
            System.arraycopy(p.buffers[b], src, out, offset + (int) (covered - start), (int) (to - covered));
            covered = to;
        }
        if (covered == end) {
            return;
        }
        throw new IllegalArgumentException("the state holds elements of '" + param + "' up to " + covered + " of ["
                + start + ", " + end + "): its shards come from ranks of another process; load from a checkpoint instead");
    }

    /**
     * One parameter's whole buffer, assembled from the shards.
     *
     * @param param  the parameter's name
     * @param buffer a buffer name
     * @return the values, row-major
     * @throws IllegalArgumentException if the state does not hold all of it
     */
    public float[] full(String param, String buffer) {
        long[] shape = shapes().get(param);
        if (shape == null) {
            throw new IllegalArgumentException("the state holds no parameter '" + param + "'");
        }
        float[] out = new float[Math.toIntExact(Tensor.numelOf(shape))];
        read(param, buffer, 0, out, 0, out.length);
        return out;
    }

    @Override
    public String toString() {
        return "ShardedStateDict[" + ranks.size() + " ranks, " + shapes().size() + " parameters, buffers "
                + bufferNames + ", " + progress + "]";
    }
}
