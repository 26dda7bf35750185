// How a reduce-scatter or all-reduce combines the ranks' buffers: a sum, an average, or a sum
// with a divide before and after (FSDP2's fp16 recipe: divide by a power of two near √N before
// the sum so fp16 does not overflow, and by the rest after it). Immutable.
package org.fsdp4j.comm;

public record Reduction(Kind kind, double preDivide, double postDivide) {

    public enum Kind { SUM, AVG }

    public static final Reduction SUM = new Reduction(Kind.SUM, 1, 1);
    public static final Reduction AVG = new Reduction(Kind.AVG, 1, 1);

    public Reduction {
        if (kind == null) {
            throw new IllegalArgumentException("reduction kind is null");
        }
        if (!(preDivide > 0) || !(postDivide > 0) || Double.isInfinite(preDivide) || Double.isInfinite(postDivide)) {
            throw new IllegalArgumentException("divide factors must be finite and > 0, got pre=" + preDivide
                    + " post=" + postDivide);
        }
        if (kind == Kind.AVG && (preDivide != 1 || postDivide != 1)) {
            throw new IllegalArgumentException("AVG takes no divide factors; use sumDivided(pre, post)");
        }
    }

    /** out = (Σ_ranks in / pre) / post. */
    public static Reduction sumDivided(double preDivide, double postDivide) {
        return new Reduction(Kind.SUM, preDivide, postDivide);
    }

    /**
     * An average over {@code ranks} computed as FSDP2 does for fp16: pre is the power of two
     * reached by doubling while ranks % pre == 0 and ranks / pre > pre (8 → 4 then 2, 16 → 4 then 4,
     * 3 → 2 then 1.5); post = ranks / pre.
     */
    public static Reduction fp16Average(int ranks) {
        if (ranks < 1) {
            throw new IllegalArgumentException("rank count must be >= 1, got " + ranks);
        }
        int pre = 1;
        while (ranks % pre == 0 && ranks / pre > pre) {
            pre *= 2;
        }
        return sumDivided(pre, (double) ranks / pre);
    }

    /** The factor the summed buffer is multiplied by on a group of {@code groupSize} ranks. */
    public double scaleAfterSum(int groupSize) {
        return kind == Kind.AVG ? 1.0 / groupSize : 1.0 / (preDivide * postDivide);
    }

    @Override
    public String toString() {
        if (kind == Kind.AVG) {
            return "avg";
        }
        return preDivide == 1 && postDivide == 1 ? "sum" : "sum/" + preDivide + "/" + postDivide;
    }
}
