// Fuzzes the peer links' frames (issue 47, item 3): after the job's handshake a peer's bytes are
// trusted to be fsdp4j frames, and each header is read before its payload. Random and mutated
// frames must end the collective with its one refusal, a CommException (or the lost-peer error
// when the bytes stop short), within the collective's deadline; never another exception, a
// payload read past what this rank expects, or a wait past the end of the input. Also fuzzed: the
// connection's Wire handshake after the job's (PeerListener), the rings' offer (ShmPipe's set-up
// message) and the rings' control words a same-host peer writes.
package org.fsdp4j.comm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Map;
import org.fsdp4j.api.DType;
import org.fsdp4j.testing.Fuzz;
import org.junit.jupiter.api.Test;

class PeerFrameFuzzTest {

    private static final long SEED = 0xF4A3E5L;
    private static final int PAYLOAD = 24;
    /** The header's count, index and payload-length fields (big-endian, as Frame.write puts them). */
    private static final int[] FRAME_INTS = {24, 28, 32};

    /** A valid message: two frames of one collective, each header then payload. */
    private static byte[] validMessage(Wire.Frame collective, byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(2 * (Wire.HEADER_BYTES + PAYLOAD));
        for (int i = 0; i < 2; i++) {
            b.put(collective.frame(i, PAYLOAD).encode()).put(payload);
        }
        return b.array();
    }

    private static SocketChannel[] pair(ServerSocketChannel server) throws IOException {
        SocketChannel a = SocketChannel.open(server.getLocalAddress());
        SocketChannel b = server.accept();
        return new SocketChannel[] {a, b};
    }

    @Test
    void framesAreReceivedOrRefusedCleanly() throws Exception {
        Fuzz f = new Fuzz(SEED);
        Wire.Frame collective = Wire.Frame.of(CommOp.ALL_REDUCE, DType.F32, 7, 12, "allReduce(sum)");
        byte[] payload = new byte[PAYLOAD];
        f.random().nextBytes(payload);
        byte[] valid = validMessage(collective, payload);
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(1_500, 200, 4_000,
                    n -> n % 5 == 0 ? new Fuzz.Input(n, "random", f.randomBytes(2 * (Wire.HEADER_BYTES + PAYLOAD)))
                            : f.mutate(n, valid, FRAME_INTS, ByteOrder.BIG_ENDIAN),
                    CommException.class, in -> {
                        SocketChannel[] ends = pair(server);
                        try (SocketChannel sender = ends[0];
                             PeerLinks links = new PeerLinks(Map.of(1, ends[1]), Map.of(), m -> "rank " + m)) {
                            sender.write(ByteBuffer.wrap(in.bytes()));
                            sender.shutdownOutput();
                            ByteBuffer[] into = {ByteBuffer.allocate(PAYLOAD), ByteBuffer.allocate(PAYLOAD)};
                            for (int i = 0; i < 2; i++) {
                                links.receive(1, collective.frame(i, PAYLOAD), into[i]);
                            }
                            try {
                                links.run("fuzz", System.nanoTime(), Duration.ofSeconds(5), () -> null);
                            } catch (PeerLinks.LostPeerException stoppedShort) {
                                return;                 // the bytes ended before the frames did: the peer's end
                            }
                            for (ByteBuffer b : into) {   // accepted: the headers were the ones expected, the payloads whole
                                assertFalse(b.hasRemaining(), in.describe(f.seed()));
                            }
                        }
                    }), "seed " + SEED);
            assertTrue(ran >= 200, "seed " + SEED + ": only " + ran + " inputs");
        }
    }

    /** A header's fields read back as written, and describe() names any op and dtype byte without failing. */
    @Test
    void anyHeaderDescribesItself() {
        Fuzz f = new Fuzz(SEED + 1);
        int ran = f.run(20_000, 2_000, 1_000, n -> new Fuzz.Input(n, "random header", randomHeader(f)),
                CommException.class, in -> {
                    ByteBuffer b = ByteBuffer.wrap(in.bytes());
                    Wire.Frame got = Wire.Frame.read(b);
                    if (got != null) {
                        assertTrue(!got.describe().isEmpty());
                        assertArrayEquals(in.bytes(), withZeroPadding(got.encode().array(), in.bytes()), in.describe(f.seed()));
                    }
                });
        assertTrue(ran >= 2_000, "seed " + f.seed() + ": only " + ran + " inputs");
    }

    private static byte[] randomHeader(Fuzz f) {
        byte[] b = new byte[Wire.HEADER_BYTES];
        f.random().nextBytes(b);
        if (f.random().nextBoolean()) {
            ByteBuffer.wrap(b).putInt(0, Wire.FRAME_MAGIC);
        }
        return b;
    }

    /** {@code encoded} with the header's reserved bytes (6..8, 36..40) taken from {@code original}. */
    private static byte[] withZeroPadding(byte[] encoded, byte[] original) {
        byte[] e = encoded.clone();
        System.arraycopy(original, 6, e, 6, 2);
        System.arraycopy(original, 36, e, 36, 4);
        return e;
    }

    /** Fuzzed ring offers: the answering side stays on TCP (null) or fails with CommException, never maps a stranger's file. */
    @Test
    void ringOffersAreRefusedCleanly() throws Exception {
        Fuzz f = new Fuzz(SEED + 2);
        ByteBuffer offer = ByteBuffer.allocate(16 + 24).putInt(0x46344A53).putLong(12345).putInt(24)
                .put("/dev/shm/fsdp4j-x.rings!".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        byte[] valid = offer.array();
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(1_000, 200, 3_000,
                    n -> n % 4 == 0 ? new Fuzz.Input(n, "random", f.randomBytes(64))
                            : f.mutate(n, valid, new int[] {12}, ByteOrder.BIG_ENDIAN),
                    CommException.class, in -> {
                        SocketChannel[] ends = pair(server);
                        try (SocketChannel sender = ends[0]; SocketChannel answerer = ends[1]) {
                            sender.write(ByteBuffer.wrap(in.bytes()));
                            sender.shutdownOutput();
                            assertNull(ShmPipe.negotiate(answerer, false, true, Duration.ofSeconds(5)), in.describe(f.seed()));
                        }
                    }), "seed " + f.seed());
            assertTrue(ran >= 200, "seed " + f.seed() + ": only " + ran + " inputs");
        }
    }

    /**
     * The rings' control words (the peer's running byte count) set to anything a corrupt or
     * hostile same-host peer could write: a read or write moves at most what fits, or refuses
     * with an IOException (which the links turn into the lost-peer error), never fails otherwise.
     */
    @Test
    void ringControlWordsAreCheckedCleanly() throws Exception {
        Fuzz f = new Fuzz(SEED + 3);
        java.nio.file.Path file = java.nio.file.Files.createTempFile("fsdp4j-fuzz", ".rings");
        long span = 4096 + ShmPipe.RING_BYTES;
        try {
            try (java.nio.channels.FileChannel c = java.nio.channels.FileChannel.open(file,
                    java.nio.file.StandardOpenOption.WRITE)) {
                c.write(ByteBuffer.allocate(1), 2 * span - 1);
            }
            java.nio.MappedByteBuffer map = ShmFile.map(file, 2 * span);
            int ran = f.run(20_000, 2_000, 1_500, n -> new Fuzz.Input(n, "control word", ByteBuffer.allocate(9)
                    .putLong(f.extreme() + (f.random().nextBoolean() ? 0 : f.random().nextInt(3 * ShmPipe.RING_BYTES)))
                    .put((byte) f.random().nextInt(2)).array()), IOException.class, in -> {
                        ByteBuffer b = ByteBuffer.wrap(in.bytes());
                        long word = b.getLong(0);
                        boolean reading = b.get(8) == 1;
                        ShmPipe pipe = new ShmPipe(map, true);      // this side's counts start at 0
                        if (reading) {
                            map.putLong((int) span, word);             // the incoming ring's head, the peer's
                            ByteBuffer dst = ByteBuffer.allocate(64);
                            boolean possible = word >= 0 && word <= ShmPipe.RING_BYTES;
                            int moved = pipe.read(dst);
                            assertTrue(possible, "a head of " + word + " was read from: " + in.describe(f.seed()));
                            assertTrue(moved >= 0 && moved <= 64 && dst.position() == moved, in.describe(f.seed()));
                        } else {
                            map.putLong(128, word);                    // the outgoing ring's tail, the peer's
                            ByteBuffer src = ByteBuffer.allocate(64);
                            boolean possible = word <= 0 && word >= -ShmPipe.RING_BYTES;
                            long moved = pipe.write(new ByteBuffer[] {src});
                            assertTrue(possible, "a tail of " + word + " was written past: " + in.describe(f.seed()));
                            assertTrue(moved >= 0 && moved <= 64, in.describe(f.seed()));
                        }
                    });
            assertTrue(ran >= 2_000, "seed " + f.seed() + ": only " + ran + " inputs");
            ShmFile.unmap(map);
        } finally {
            java.nio.file.Files.deleteIfExists(file);
        }
    }

    /**
     * Fuzzed Wire handshakes over connections that passed the job's: each is answered (accepted or
     * refused) or closed at once, no listener thread dies of an exception, and the listener still
     * joins a real pair of ranks afterwards.
     */
    @Test
    void wireHandshakesAreAnsweredOrRefusedCleanly() throws Exception {
        Fuzz f = new Fuzz(SEED + 4);
        JobToken token = JobToken.generate();
        InetAddress loopback = InetAddress.getLoopbackAddress();
        byte[] valid = Wire.handshake(7, "world", 1, 0).array();
        java.util.List<Throwable> died = new java.util.concurrent.CopyOnWriteArrayList<>();
        Thread.UncaughtExceptionHandler before = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> died.add(e));
        try (PeerListener here = PeerListener.open(7, token, loopback, new RefusalLog(line -> { }));
             PeerListener there = PeerListener.open(7, token, loopback, new RefusalLog(line -> { }))) {
            int ran = assertTimeoutPreemptively(Duration.ofSeconds(30), () -> f.run(400, 50, 2_000,
                    n -> n % 5 == 0 ? new Fuzz.Input(n, "random", f.randomBytes(48))
                            : f.mutate(n, valid, new int[] {4, 16, 20, 24}, ByteOrder.BIG_ENDIAN),
                    IOException.class, in -> {
                        try (java.net.Socket s = new java.net.Socket(loopback, here.port())) {
                            s.setSoTimeout(5_000);                 // a hang is a SocketTimeoutException: not an IOException here
                            Handshake.open(s, token, Handshake.Kind.PEER, Duration.ofSeconds(10));
                            s.getOutputStream().write(in.bytes());
                            s.shutdownOutput();
                            try {
                                s.getInputStream().read();         // the answer, or the end
                            } catch (java.net.SocketTimeoutException hung) {
                                throw new AssertionError("no answer within 5 s: " + in.describe(f.seed()), hung);
                            }
                        }
                    }), "seed " + f.seed());
            assertTrue(ran >= 50, "seed " + f.seed() + ": only " + ran + " inputs");
            assertTrue(died.isEmpty(), "seed " + f.seed() + ": a listener thread died: " + died);
            java.net.InetSocketAddress address = new java.net.InetSocketAddress(loopback, here.port());
            try (SocketChannel out = there.connect(address, "after/fuzz", 1, 0, Duration.ofSeconds(10));
                 SocketChannel in = here.await("after/fuzz", 1, 0, Duration.ofSeconds(10), () -> false)) {
                assertTrue(out.isConnected() && in.isConnected(), "seed " + f.seed());
            }
        } finally {
            Thread.setDefaultUncaughtExceptionHandler(before);
        }
    }
}
