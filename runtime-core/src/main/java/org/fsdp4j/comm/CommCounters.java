// One rank's running byte counts for one communicator (see CommOp for the convention).
// Written by the communicator's stream thread, read by the rank's step loop.
package org.fsdp4j.comm;

public final class CommCounters {

    private final long[] sent = new long[CommOp.values().length];
    private final long[] received = new long[CommOp.values().length];

    public synchronized void record(CommOp op, long sentBytes, long receivedBytes) {
        sent[op.ordinal()] += sentBytes;
        received[op.ordinal()] += receivedBytes;
    }

    public synchronized CommBytes snapshot() {
        return new CommBytes(sent, received);
    }
}
