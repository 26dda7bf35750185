// The rendezvous store's wire format, shared by StoreServer and StoreClient (PyTorch's TCPStore
// plays the same part). One request, one response, over one TCP connection at a time:
//
//   request   int magic 'FSDQ' | byte version | byte op | short 0 | int keyBytes | int valueBytes
//             | int value2Bytes | long argument (a timeout in ms, or ADD's delta) | key | value | value2
//   response  int magic 'FSDR' | byte status | int payloadBytes | payload (a value, or a UTF-8 message)
//
// Every length is bounded before anything is allocated, so a peer that sends nonsense costs the
// server a few bytes and is dropped with an error, never an allocation of what it claims.
package org.fsdp4j.dist;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

final class StoreProtocol {

    static final int REQUEST_MAGIC = 0x46534451;    // "FSDQ"
    static final int RESPONSE_MAGIC = 0x46534452;   // "FSDR"
    static final byte VERSION = 1;
    static final int MAX_KEY_BYTES = 4096;
    static final int MAX_VALUE_BYTES = 16 << 20;
    /** Longest a single call may wait on the server (a day: a bound, not a policy). */
    static final long MAX_WAIT_MILLIS = 86_400_000L;

    /** What a request asks. */
    enum Op {
        /** key = value. */
        SET(1),
        /** The value of key, waiting up to argument ms for it to be set. */
        GET(2),
        /** key += argument (a decimal integer; a missing key counts as 0); answers the new value. */
        ADD(3),
        /** If key's value is value (a missing key matches an empty value), set it to value2; answers the value now. */
        COMPARE_SET(4),
        /** Whether key is set: OK or NOT_FOUND. */
        CHECK(5),
        /** Removes key: OK whether or not it was set. */
        DELETE(6);

        final byte code;

        Op(int code) {
            this.code = (byte) code;
        }

        static Op of(byte code) {
            for (Op op : values()) {
                if (op.code == code) {
                    return op;
                }
            }
            return null;
        }
    }

    /** How a request ended. */
    enum Status {
        OK(0), TIMEOUT(1), NOT_FOUND(2), ERROR(3);

        final byte code;

        Status(int code) {
            this.code = (byte) code;
        }

        static Status of(byte code) {
            for (Status s : values()) {
                if (s.code == code) {
                    return s;
                }
            }
            return null;
        }
    }

    record Request(Op op, String key, byte[] value, byte[] value2, long argument) {
    }

    record Response(Status status, byte[] payload) {
        String text() {
            return new String(payload, StandardCharsets.UTF_8);
        }
    }

    /** A request or response that does not follow the format; its message says how. */
    static final class MalformedException extends IOException {
        private static final long serialVersionUID = 1L;

        MalformedException(String message) {
            super(message);
        }
    }

    private StoreProtocol() {
    }

    static void writeRequest(DataOutputStream out, Request r) throws IOException {
        byte[] key = r.key().getBytes(StandardCharsets.UTF_8);
        checkLength("key", key.length, MAX_KEY_BYTES);
        checkLength("value", r.value().length, MAX_VALUE_BYTES);
        checkLength("value", r.value2().length, MAX_VALUE_BYTES);
        out.writeInt(REQUEST_MAGIC);
        out.writeByte(VERSION);
        out.writeByte(r.op().code);
        out.writeShort(0);
        out.writeInt(key.length);
        out.writeInt(r.value().length);
        out.writeInt(r.value2().length);
        out.writeLong(r.argument());
        out.write(key);
        out.write(r.value());
        out.write(r.value2());
        out.flush();
    }

    /** The next request, or null at a clean end of stream (the client hung up between requests). */
    static Request readRequest(DataInputStream in) throws IOException {
        int magic;
        try {
            magic = in.readInt();
        } catch (java.io.EOFException e) {
            return null;
        }
        if (magic != REQUEST_MAGIC) {
            throw new MalformedException(String.format("not a store request (magic 0x%08x, expected 0x%08x)",
                    magic, REQUEST_MAGIC));
        }
        byte version = in.readByte();
        if (version != VERSION) {
            throw new MalformedException("store protocol version " + version + ", this server speaks " + VERSION);
        }
        byte opCode = in.readByte();
        Op op = Op.of(opCode);
        if (op == null) {
            throw new MalformedException("unknown store operation " + opCode);
        }
        in.readShort();
        int keyBytes = in.readInt();
        int valueBytes = in.readInt();
        int value2Bytes = in.readInt();
        long argument = in.readLong();
        checkLength("key", keyBytes, MAX_KEY_BYTES);
        checkLength("value", valueBytes, MAX_VALUE_BYTES);
        checkLength("value", value2Bytes, MAX_VALUE_BYTES);
        if ((op == Op.GET) && (argument < 0 || argument > MAX_WAIT_MILLIS)) {
            throw new MalformedException("wait of " + argument + " ms is outside [0, " + MAX_WAIT_MILLIS + "]");
        }
        byte[] key = in.readNBytes(keyBytes);
        byte[] value = in.readNBytes(valueBytes);
        byte[] value2 = in.readNBytes(value2Bytes);
        if (key.length != keyBytes || value.length != valueBytes || value2.length != value2Bytes) {
            throw new java.io.EOFException("the client hung up in the middle of a request");
        }
        return new Request(op, new String(key, StandardCharsets.UTF_8), value, value2, argument);
    }

    static void writeResponse(DataOutputStream out, Status status, byte[] payload) throws IOException {
        out.writeInt(RESPONSE_MAGIC);
        out.writeByte(status.code);
        out.writeInt(payload.length);
        out.write(payload);
        out.flush();
    }

    static Response readResponse(DataInputStream in) throws IOException {
        int magic = in.readInt();
        if (magic != RESPONSE_MAGIC) {
            throw new MalformedException(String.format("not a store response (magic 0x%08x): is something else"
                    + " listening on the master port?", magic));
        }
        Status status = Status.of(in.readByte());
        if (status == null) {
            throw new MalformedException("unknown store status");
        }
        int length = in.readInt();
        checkLength("response", length, MAX_VALUE_BYTES);
        byte[] payload = in.readNBytes(length);
        if (payload.length != length) {
            throw new java.io.EOFException("the store hung up in the middle of a response");
        }
        return new Response(status, payload);
    }

    private static void checkLength(String what, int length, int max) throws MalformedException {
        if (length < 0 || length > max) {
            throw new MalformedException(what + " of " + length + " bytes is outside [0, " + max + "]");
        }
    }
}
