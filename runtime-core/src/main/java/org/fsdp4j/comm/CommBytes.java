// A snapshot of one rank's communication volume, per collective, so a step can report what it
// moved (the difference of two snapshots) and a test can compare it with the layout's formula.
package org.fsdp4j.comm;

import java.util.Arrays;

public record CommBytes(long[] sentByOp, long[] receivedByOp) {

    public static final CommBytes ZERO = new CommBytes(new long[CommOp.values().length], new long[CommOp.values().length]);

    public CommBytes {
        sentByOp = sentByOp.clone();
        receivedByOp = receivedByOp.clone();
    }

    public long sent(CommOp op) {
        return sentByOp[op.ordinal()];
    }

    public long received(CommOp op) {
        return receivedByOp[op.ordinal()];
    }

    public long sentBytes() {
        return Arrays.stream(sentByOp).sum();
    }

    public long receivedBytes() {
        return Arrays.stream(receivedByOp).sum();
    }

    public CommBytes plus(CommBytes o) {
        long[] s = sentByOp.clone();
        long[] r = receivedByOp.clone();
        for (int i = 0; i < s.length; i++) {
            s[i] += o.sentByOp[i];
            r[i] += o.receivedByOp[i];
        }
        return new CommBytes(s, r);
    }

    public CommBytes minus(CommBytes o) {
        long[] s = sentByOp.clone();
        long[] r = receivedByOp.clone();
        for (int i = 0; i < s.length; i++) {
            s[i] -= o.sentByOp[i];
            r[i] -= o.receivedByOp[i];
        }
        return new CommBytes(s, r);
    }

    @Override
    public long[] sentByOp() {
        return sentByOp.clone();
    }

    @Override
    public long[] receivedByOp() {
        return receivedByOp.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof CommBytes c && Arrays.equals(c.sentByOp, sentByOp) && Arrays.equals(c.receivedByOp, receivedByOp);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(sentByOp) * 31 + Arrays.hashCode(receivedByOp);
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("CommBytes(sent " + sentBytes() + " B, received " + receivedBytes() + " B");
        for (CommOp op : CommOp.values()) {
            if (sent(op) != 0 || received(op) != 0) {
                b.append(", ").append(op.label()).append(' ').append(sent(op)).append('/').append(received(op));
            }
        }
        return b.append(')').toString();
    }
}
