// Fuzzes the rendezvous store's wire format (issue 47, item 3): a process that passed the job's
// handshake can still send anything, and the store is the one server every process of the run
// depends on. Random and mutated requests (and responses, which a client reads) must each end in
// the protocol's one refusal, an IOException (MalformedException or EOFException), or parse;
// never another exception, an allocation of a claimed length, or a wait past the input's end.
// The last test sends such inputs over real, authenticated connections and checks that the
// server still serves a well-behaved client afterwards.
package org.fsdp4j.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.fsdp4j.comm.Handshake;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.RefusalLog;
import org.fsdp4j.dist.StoreProtocol.Op;
import org.fsdp4j.dist.StoreProtocol.Request;
import org.fsdp4j.testing.Fuzz;
import org.junit.jupiter.api.Test;

class StoreRequestFuzzTest {

    private static final long SEED = 0x5704E47L;
    /** Offsets of the request's length fields (key, value, value2) and the response's. */
    private static final int[] REQUEST_LENGTHS = {8, 12, 16};
    private static final int[] RESPONSE_LENGTHS = {5};

    private static byte[] request(Fuzz f) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        Op op = Op.values()[f.random().nextInt(Op.values().length)];
        byte[] value = new byte[f.random().nextInt(24)];
        f.random().nextBytes(value);
        StoreProtocol.writeRequest(out, new Request(op, "key/" + f.random().nextInt(1000), value,
                op == Op.COMPARE_SET ? "v2".getBytes(StandardCharsets.UTF_8) : new byte[0],
                op == Op.GET ? f.random().nextInt(1000) : f.random().nextInt(5)));
        return bytes.toByteArray();
    }

    private static Fuzz.Input input(Fuzz f, int n, int[] lengths, byte[] valid) {
        return n % 4 == 0 ? new Fuzz.Input(n, "random", f.randomBytes(64))
                : f.mutate(n, valid, lengths, ByteOrder.BIG_ENDIAN);
    }

    @Test
    void requestsAreParsedOrRefusedCleanly() {
        Fuzz f = new Fuzz(SEED);
        int ran = assertTimeoutPreemptively(Duration.ofSeconds(20), () -> f.run(20_000, 2_000, 3_000, n -> {
            try {
                byte[] valid = request(f);
                // two requests back to back: the second is read from where the first (mutated) ended
                byte[] two = new byte[valid.length * 2];
                System.arraycopy(valid, 0, two, 0, valid.length);
                System.arraycopy(valid, 0, two, valid.length, valid.length);
                return input(f, n, REQUEST_LENGTHS, f.random().nextBoolean() ? valid : two);
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        }, IOException.class, in -> {
            DataInputStream s = new DataInputStream(new ByteArrayInputStream(in.bytes()));
            for (int i = 0; i < 4 && StoreProtocol.readRequest(s) != null; i++) {
                // each request parsed; the stream's end (or a refusal) ends the input
            }
        }), "seed " + SEED);
        assertTrue(ran >= 2_000, "seed " + SEED + ": only " + ran + " inputs");
    }

    @Test
    void responsesAreParsedOrRefusedCleanly() {
        Fuzz f = new Fuzz(SEED + 1);
        int ran = assertTimeoutPreemptively(Duration.ofSeconds(20), () -> f.run(20_000, 2_000, 2_000, n -> {
            try {
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                StoreProtocol.writeResponse(new DataOutputStream(bytes),
                        StoreProtocol.Status.values()[f.random().nextInt(4)], f.randomBytes(24));
                return input(f, n, RESPONSE_LENGTHS, bytes.toByteArray());
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        }, IOException.class, in -> StoreProtocol.readResponse(new DataInputStream(new ByteArrayInputStream(in.bytes())))),
                "seed " + SEED);
        assertTrue(ran >= 2_000, "seed " + SEED + ": only " + ran + " inputs");
    }

    /** Claimed lengths past the bounds are refused from the 28-byte header alone, before any allocation. */
    @Test
    void hugeClaimedLengthsAreRefusedBeforeAllocating() throws IOException {
        for (int field : REQUEST_LENGTHS) {
            for (int claim : new int[] {Integer.MAX_VALUE, -1, Integer.MIN_VALUE, StoreProtocol.MAX_VALUE_BYTES + 1}) {
                byte[] b = request(new Fuzz(SEED));
                java.nio.ByteBuffer.wrap(b).putInt(field, claim);
                InputStream header = new ByteArrayInputStream(b, 0, 28);       // nothing past the header to read
                try {
                    StoreProtocol.readRequest(new DataInputStream(header));
                    throw new AssertionError("length " + claim + " at byte " + field + " was accepted");
                } catch (StoreProtocol.MalformedException expected) {
                    assertTrue(expected.getMessage().contains("outside"), expected.getMessage());
                }
            }
        }
    }

    /** Fuzzed requests over authenticated connections: each is dropped alone, and the store keeps serving. */
    @Test
    void theServerSurvivesFuzzedConnections() throws Exception {
        JobToken token = JobToken.generate();
        Fuzz f = new Fuzz(SEED + 2);
        try (StoreServer server = StoreServer.start(InetAddress.getLoopbackAddress(), 0, token, new RefusalLog(l -> { }))) {
            int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(300, 50, 3_000, n -> {
                try {
                    return input(f, n, REQUEST_LENGTHS, request(f));
                } catch (IOException e) {
                    throw new AssertionError(e);
                }
            }, IOException.class, in -> {
                try (Socket s = new Socket(InetAddress.getLoopbackAddress(), server.port())) {
                    s.setSoTimeout(200);
                    Handshake.open(s, token, Handshake.Kind.STORE, Duration.ofSeconds(10));
                    s.getOutputStream().write(in.bytes());
                    s.shutdownOutput();
                    try {
                        s.getInputStream().readAllBytes();       // the answers, the refusal, or the end
                    } catch (java.net.SocketTimeoutException waiting) {
                        // a valid GET of a key nobody sets waits as asked: not the fuzzer's business
                    }
                }
            }), "seed " + f.seed());
            assertTrue(ran >= 50, "seed " + f.seed() + ": only " + ran + " inputs");
            try (StoreClient c = StoreClient.connect("127.0.0.1", server.port(), Duration.ofSeconds(10), token)) {
                c.set("after/fuzz", "ok");
                assertEquals("ok", c.getString("after/fuzz", Duration.ofSeconds(5)), "seed " + f.seed());
            }
        }
    }
}
