// What travels between the processes of a TcpGroup. A connection starts with a handshake that
// names the run, the communicator and the two ranks; after it, every message of a collective
// travels as frames of at most MAX_FRAME_BYTES, each behind a header that names the collective
// (operation, sequence number, dtype, element count, a hash of its full signature) and the
// frame. The receiver checks each header against the collective it is running itself before it
// reads a byte of payload, so ranks that disagree on the collective get an error naming both
// sides, never garbage in their buffers, and a peer that sends nonsense is dropped with an error.
package org.fsdp4j.comm;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.fsdp4j.api.DType;

final class Wire {

    static final int FRAME_MAGIC = 0x46344A43;       // "F4JC"
    static final int HANDSHAKE_MAGIC = 0x46344A48;   // "F4JH"
    static final int VERSION = 1;
    static final int HEADER_BYTES = 40;
    /** The largest payload of one frame: bounds what a receiver stages and what a header may claim. */
    static final int MAX_FRAME_BYTES = 8 << 20;
    static final int MAX_KEY_BYTES = 1024;
    /** The op byte of the frames a split exchanges (colour and key), which is no CommOp. */
    static final int SPLIT_INFO = 0x7e;
    /** The op byte of shared memory's set-up frames (the agreement, a shared buffer's offer and answers). */
    static final int SHARE_INFO = 0x7d;

    private Wire() {
    }

    /**
     * One frame's header. {@code op} is a CommOp ordinal (or SPLIT_INFO, SHARE_INFO),
     * {@code dtype} a DType ordinal (−1 for none), {@code count} the collective's element count as
     * its signature gives it, {@code signatureHash} the hash of the whole signature (reduction, root).
     */
    record Frame(int op, int dtype, long seq, long count, int signatureHash, int index, int payloadBytes) {

        static Frame of(CommOp op, DType dtype, long seq, long count, String signature) {
            return new Frame(op.ordinal(), dtype == null ? -1 : dtype.ordinal(), seq, count, signature.hashCode(), 0, 0);
        }

        Frame frame(int index, int payloadBytes) {
            return new Frame(op, dtype, seq, count, signatureHash, index, payloadBytes);
        }

        boolean sameCollective(Frame o) {
            return op == o.op && dtype == o.dtype && seq == o.seq && count == o.count && signatureHash == o.signatureHash;
        }

        void write(ByteBuffer b) {
            b.putInt(FRAME_MAGIC).put((byte) op).put((byte) dtype).putShort((short) 0).putLong(seq).putLong(count)
                    .putInt(signatureHash).putInt(index).putInt(payloadBytes).putInt(0);
        }

        ByteBuffer encode() {
            ByteBuffer b = ByteBuffer.allocate(HEADER_BYTES);
            write(b);
            return b.flip();
        }

        /** The header in {@code b} (HEADER_BYTES, position 0); null if it does not start with the magic. */
        static Frame read(ByteBuffer b) {
            if (b.getInt(0) != FRAME_MAGIC) {
                return null;
            }
            return new Frame(b.get(4) & 0xff, b.get(5), b.getLong(8), b.getLong(16), b.getInt(24), b.getInt(28),
                    b.getInt(32));
        }

        /** "reduceScatter #7 (bf16, 4096 elements)", for messages. */
        String describe() {
            String what = op == SPLIT_INFO ? "split" : op == SHARE_INFO ? "shared-memory set-up"
                    : op >= 0 && op < CommOp.values().length ? CommOp.values()[op].label() : "operation " + op;
            String type = dtype >= 0 && dtype < DType.values().length ? DType.values()[dtype].shortName() : "no data";
            return what + " #" + seq + " (" + type + ", " + count + " elements)";
        }
    }

    /** The frames a message of {@code bytes} bytes travels in: at least one (an empty one for none). */
    static int frameCount(long bytes) {
        return (int) Math.max(1, (bytes + MAX_FRAME_BYTES - 1) / MAX_FRAME_BYTES);
    }

    /** The payload of frame {@code index} of a message of {@code bytes} bytes. */
    static int frameBytes(long bytes, int index) {
        return (int) Math.min(MAX_FRAME_BYTES, bytes - (long) index * MAX_FRAME_BYTES);
    }

    /** The handshake an opening side sends: run, communicator key, from rank, to rank. */
    static ByteBuffer handshake(long runId, String key, int from, int to) {
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        if (k.length > MAX_KEY_BYTES) {
            throw new IllegalArgumentException("communicator key of " + k.length + " bytes: at most " + MAX_KEY_BYTES);
        }
        ByteBuffer b = ByteBuffer.allocate(4 + 4 + 8 + 4 + 4 + 4 + k.length);
        b.putInt(HANDSHAKE_MAGIC).putInt(VERSION).putLong(runId).putInt(from).putInt(to).putInt(k.length).put(k);
        return b.flip();
    }
}
