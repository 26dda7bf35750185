// The collectives, and how many bytes each moves per rank. The convention is NCCL's ring
// algorithms (the same one nccl-tests' busbw uses), so the counts are what a real interconnect
// carries rather than what the in-process group happens to copy:
//   all-gather, reduce-scatter: (N−1)/N of the full (gathered / unreduced) buffer, sent and received;
//   all-reduce: 2(N−1)/N of the buffer (a reduce-scatter then an all-gather), floored to whole bytes;
//   broadcast: the buffer, sent by every rank but the last in the ring (root−1) and received by
//              every rank but the root; barrier: nothing.
package org.fsdp4j.comm;

public enum CommOp {
    ALL_GATHER("allGather"),
    REDUCE_SCATTER("reduceScatter"),
    ALL_REDUCE("allReduce"),
    BROADCAST("broadcast"),
    BARRIER("barrier"),
    SPLIT("split");

    private final String label;

    CommOp(String label) {
        this.label = label;
    }

    public String label() {
        return label;
    }

    /** Bytes this rank sends for one call on {@code fullBytes} (see the file comment for "full"). */
    public long sentBytes(long fullBytes, int groupSize, int rank, int root) {
        switch (this) {
            case ALL_GATHER:
            case REDUCE_SCATTER:
                return fullBytes / groupSize * (groupSize - 1);
            case ALL_REDUCE:
                return 2L * (groupSize - 1) * fullBytes / groupSize;
            case BROADCAST:
                return groupSize > 1 && rank != Math.floorMod(root - 1, groupSize) ? fullBytes : 0;
            default:
                return 0;
        }
    }

    /** Bytes this rank receives for one call on {@code fullBytes}. */
    public long receivedBytes(long fullBytes, int groupSize, int rank, int root) {
        if (this == BROADCAST) {
            return rank != root ? fullBytes : 0;
        }
        return sentBytes(fullBytes, groupSize, rank, root);
    }
}
