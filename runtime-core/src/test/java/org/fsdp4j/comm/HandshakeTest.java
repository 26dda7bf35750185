// The job handshake over real loopback sockets: the same token passes on both sides; another
// token fails on both sides (the opening side is refused, the accepting side sees a wrong proof);
// a process without a token and a job with one tell each other apart; a listener that reflects
// the opening side's own proof back is caught (the proofs name their role); a connection of the
// other kind is refused; garbage, a truncated hello and a stall (also one that drips a byte at a
// time, each within the read timeout) end the handshake cleanly and within its limit; and no
// failure's message holds the token.
package org.fsdp4j.comm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class HandshakeTest {

    private static final Duration LIMIT = Duration.ofSeconds(5);
    private static final JobToken TOKEN = JobToken.of("a".repeat(16) + "0123456789abcdef0123456789abcdef", "a test");
    private static final JobToken OTHER = JobToken.generate();

    private ServerSocket server;

    @BeforeEach
    void listen() throws IOException {
        server = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
    }

    @AfterEach
    void close() throws IOException {
        server.close();
    }

    /** The accepting side's handshake on the next connection, on a thread: its failure, or null when it passed. */
    private CompletableFuture<Throwable> accepting(JobToken token, Handshake.Kind kind, Duration limit) {
        return CompletableFuture.supplyAsync(() -> {
            try (Socket s = server.accept()) {
                Handshake.accept(s, token, kind, limit);
                s.getOutputStream().write(42);      // the connection is usable afterwards
                return null;
            } catch (Throwable t) {
                return t;
            }
        });
    }

    private Socket dial() throws IOException {
        return new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
    }

    private static Handshake.Failed failed(Throwable t) {
        assertTrue(t instanceof Handshake.Failed, "a Handshake.Failed, not " + t);
        Handshake.Failed f = (Handshake.Failed) t;
        assertFalse(f.getMessage().contains("0123456789abcdef"), "the token leaked into: " + f.getMessage());
        return f;
    }

    @Test
    void theSameTokenPassesOnBothSidesAndLeavesTheConnectionUsable() throws Exception {
        for (JobToken t : new JobToken[] {TOKEN, JobToken.NONE}) {
            CompletableFuture<Throwable> acceptor = accepting(t, Handshake.Kind.STORE, LIMIT);
            try (Socket s = dial()) {
                Handshake.open(s, t, Handshake.Kind.STORE, LIMIT);
                assertEquals(42, s.getInputStream().read());
                assertEquals(0, s.getSoTimeout(), "the read timeout is given back");
            }
            assertNull(acceptor.get(10, TimeUnit.SECONDS), t.toString());
        }
    }

    @Test
    void anotherTokenFailsOnBothSides() throws Exception {
        CompletableFuture<Throwable> acceptor = accepting(TOKEN, Handshake.Kind.STORE, LIMIT);
        try (Socket s = dial()) {
            Handshake.Failed f = failed(assertThrows(Handshake.Failed.class,
                    () -> Handshake.open(s, OTHER, Handshake.Kind.STORE, LIMIT)));
            assertEquals(Handshake.Reason.REFUSED, f.reason());
            assertTrue(f.definitive() && f.otherHasToken());
        }
        Handshake.Failed f = failed(acceptor.get(10, TimeUnit.SECONDS));
        assertEquals(Handshake.Reason.WRONG_PROOF, f.reason());
        assertEquals("it did not prove this job's token", f.getMessage());
    }

    @Test
    void aProcessWithoutATokenAndAJobWithOneTellEachOtherApart() throws Exception {
        CompletableFuture<Throwable> acceptor = accepting(TOKEN, Handshake.Kind.PEER, LIMIT);
        try (Socket s = dial()) {
            Handshake.Failed f = failed(assertThrows(Handshake.Failed.class,
                    () -> Handshake.open(s, JobToken.NONE, Handshake.Kind.PEER, LIMIT)));
            assertTrue(f.otherHasToken(), "the listener said it has a token");
        }
        assertEquals("it has no job token", failed(acceptor.get(10, TimeUnit.SECONDS)).getMessage());

        acceptor = accepting(JobToken.NONE, Handshake.Kind.PEER, LIMIT);
        try (Socket s = dial()) {
            Handshake.Failed f = failed(assertThrows(Handshake.Failed.class,
                    () -> Handshake.open(s, TOKEN, Handshake.Kind.PEER, LIMIT)));
            assertFalse(f.otherHasToken());
        }
        assertEquals("it has a job token and this job has none", failed(acceptor.get(10, TimeUnit.SECONDS)).getMessage());
    }

    @Test
    void aListenerThatReflectsTheOpeningSidesProofIsCaught() throws Exception {
        // the impostor does not know the token: it sends the opener's own nonce back as its own and
        // answers with the opener's proof, which would pass if both roles signed the same text
        CompletableFuture<Void> impostor = CompletableFuture.runAsync(() -> {
            try (Socket s = server.accept()) {
                DataInputStream in = new DataInputStream(s.getInputStream());
                byte[] hello = in.readNBytes(Handshake.HELLO_BYTES);
                OutputStream out = s.getOutputStream();
                out.write(hello);
                byte[] proof = in.readNBytes(Handshake.PROOF_BYTES);
                out.write(1);
                out.write(proof);
                out.flush();
                in.read();
            } catch (IOException ignored) {
                // the opener hangs up
            }
        });
        try (Socket s = dial()) {
            Handshake.Failed f = failed(assertThrows(Handshake.Failed.class,
                    () -> Handshake.open(s, TOKEN, Handshake.Kind.STORE, LIMIT)));
            assertEquals(Handshake.Reason.WRONG_PROOF, f.reason());
        }
        impostor.get(10, TimeUnit.SECONDS);
        byte[] n = new byte[Handshake.NONCE_BYTES];
        assertFalse(java.util.Arrays.equals(Handshake.proof(TOKEN, Handshake.Kind.STORE, "opening", n, n),
                Handshake.proof(TOKEN, Handshake.Kind.STORE, "accepting", n, n)));
        assertFalse(java.util.Arrays.equals(Handshake.proof(TOKEN, Handshake.Kind.STORE, "opening", n, n),
                Handshake.proof(TOKEN, Handshake.Kind.PEER, "opening", n, n)));
        assertArrayEquals(Handshake.proof(TOKEN, Handshake.Kind.STORE, "opening", n, n),
                Handshake.proof(JobToken.of(new String("a".repeat(16) + "0123456789abcdef0123456789abcdef"), "again"),
                        Handshake.Kind.STORE, "opening", n, n), "a proof depends on the token's text only");
    }

    @Test
    void aConnectionOfTheOtherKindIsRefused() throws Exception {
        CompletableFuture<Throwable> acceptor = accepting(TOKEN, Handshake.Kind.STORE, LIMIT);
        try (Socket s = dial()) {
            assertThrows(IOException.class, () -> Handshake.open(s, TOKEN, Handshake.Kind.PEER, LIMIT));
        }
        Handshake.Failed f = failed(acceptor.get(10, TimeUnit.SECONDS));
        assertEquals(Handshake.Reason.NOT_FSDP4J, f.reason());
    }

    @Test
    void garbageEndsTheHandshakeAtOnce() throws Exception {
        CompletableFuture<Throwable> acceptor = accepting(TOKEN, Handshake.Kind.STORE, LIMIT);
        long start = System.nanoTime();
        try (Socket s = dial()) {
            s.getOutputStream().write("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            assertEquals(-1, s.getInputStream().read(), "closed without a byte of answer");
        }
        Handshake.Failed f = failed(acceptor.get(10, TimeUnit.SECONDS));
        assertEquals(Handshake.Reason.NOT_FSDP4J, f.reason());
        assertTrue(f.getMessage().startsWith("it sent something that is not an fsdp4j handshake"), f.getMessage());
        assertTrue((System.nanoTime() - start) / 1e9 < 2, "garbage is refused at once, not after the limit");
    }

    @Test
    void aTruncatedHelloEndsTheHandshakeCleanly() throws Exception {
        CompletableFuture<Throwable> acceptor = accepting(TOKEN, Handshake.Kind.STORE, LIMIT);
        long start = System.nanoTime();
        try (Socket s = dial()) {
            s.getOutputStream().write(ByteBuffer.allocate(10).putInt(Handshake.MAGIC).put(Handshake.VERSION).array());
            s.getOutputStream().flush();
        }
        Handshake.Failed f = failed(acceptor.get(10, TimeUnit.SECONDS));
        assertEquals(Handshake.Reason.ENDED, f.reason());
        assertTrue((System.nanoTime() - start) / 1e9 < 2);
    }

    @Test
    void aStallAndADripBothEndWithinTheLimit() throws Exception {
        Duration limit = Duration.ofMillis(600);
        CompletableFuture<Throwable> acceptor = accepting(TOKEN, Handshake.Kind.STORE, limit);
        long start = System.nanoTime();
        try (Socket s = dial()) {
            s.getOutputStream().write(ByteBuffer.allocate(4).putInt(Handshake.MAGIC).array());
            Handshake.Failed f = failed(acceptor.get(10, TimeUnit.SECONDS));
            assertEquals(Handshake.Reason.STALLED, f.reason());
        }
        double stalled = (System.nanoTime() - start) / 1e9;
        assertTrue(stalled >= 0.5 && stalled < 3, "took " + stalled + " s");

        // one byte every 100 ms: each read is within any per-read timeout, the whole is not
        acceptor = accepting(TOKEN, Handshake.Kind.STORE, limit);
        start = System.nanoTime();
        try (Socket s = dial()) {
            byte[] hello = ByteBuffer.allocate(Handshake.HELLO_BYTES).putInt(Handshake.MAGIC).put(Handshake.VERSION)
                    .put((byte) 1).array();
            for (int i = 0; i < hello.length && !acceptor.isDone(); i++) {
                try {
                    s.getOutputStream().write(hello[i]);
                } catch (IOException closed) {
                    break;
                }
                Thread.sleep(100);
            }
            Handshake.Failed f = failed(acceptor.get(10, TimeUnit.SECONDS));
            assertEquals(Handshake.Reason.STALLED, f.reason());
        }
        double dripped = (System.nanoTime() - start) / 1e9;
        assertTrue(dripped < 2, "a drip is cut at the limit, took " + dripped + " s");
    }

    @Test
    void theOpeningSideGivesUpOnASilentListenerWithinItsLimit() throws Exception {
        CompletableFuture<Socket> silent = CompletableFuture.supplyAsync(() -> {
            try {
                return server.accept();
            } catch (IOException e) {
                return null;
            }
        });
        long start = System.nanoTime();
        try (Socket s = dial()) {
            Handshake.Failed f = failed(assertThrows(Handshake.Failed.class,
                    () -> Handshake.open(s, TOKEN, Handshake.Kind.STORE, Duration.ofMillis(500))));
            assertEquals(Handshake.Reason.STALLED, f.reason());
            assertFalse(f.definitive(), "a stall may pass: the caller may try again");
        }
        assertTrue((System.nanoTime() - start) / 1e9 < 3);
        silent.get(5, TimeUnit.SECONDS).close();
    }
}
