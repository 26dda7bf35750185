// A peer listener admits only this job's processes: a raw connection that sends a Wire hello
// without the job handshake, one with another token and one that says nothing are all closed
// (each address logged once), while a process of the job connects and is picked up as before; a
// process given another token fails to connect with a message that names the variables and not
// the token. The listener binds the address it is given, not every interface.
package org.fsdp4j.comm;

import static org.fsdp4j.testing.Sockets.closedWithoutAnswer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class PeerListenerAuthTest {

    private static final JobToken TOKEN = JobToken.generate();
    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();

    /** Waits until the listener has refused {@code n} connections. */
    private static void awaitRefused(PeerListener l, long n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (l.refused() < n && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(n, l.refused());
    }

    @Test
    void onlyAProcessOfThisJobGetsIn() throws Exception {
        List<String> log = new CopyOnWriteArrayList<>();
        try (PeerListener here = PeerListener.open(7, TOKEN, LOOPBACK, new RefusalLog(log::add));
             PeerListener there = PeerListener.open(7, TOKEN, LOOPBACK, new RefusalLog(line -> { }))) {
            assertEquals(LOOPBACK, here.address(InetAddress.getByName("0.0.0.0")).getAddress(),
                    "bound to the address given, so that is where the others reach it");

            try (Socket raw = new Socket(LOOPBACK, here.port())) {       // a Wire hello with no job handshake before it
                ByteBuffer hello = Wire.handshake(7, "g1/world", 0, 1);
                raw.getOutputStream().write(hello.array(), 0, hello.limit());
                assertTrue(closedWithoutAnswer(raw), "closed, not a byte of answer");
            }
            awaitRefused(here, 1);
            try (Socket wrong = new Socket(LOOPBACK, here.port())) {
                Handshake.Failed f = assertThrows(Handshake.Failed.class,
                        () -> Handshake.open(wrong, JobToken.generate(), Handshake.Kind.PEER, TIMEOUT));
                assertEquals(Handshake.Reason.REFUSED, f.reason());
            }
            awaitRefused(here, 2);

            CompletableFuture<SocketChannel> accepted = CompletableFuture.supplyAsync(
                    () -> here.await("g1/world", 0, 1, TIMEOUT, () -> false));
            try (SocketChannel out = there.connect(here.address(LOOPBACK), "g1/world", 0, 1, TIMEOUT);
                 SocketChannel in = accepted.get(10, TimeUnit.SECONDS)) {
                out.write(ByteBuffer.wrap(new byte[] {5}));
                ByteBuffer b = ByteBuffer.allocate(1);
                in.read(b);
                assertEquals(5, b.get(0), "the job's own connection carries bytes as before");
            }
            assertEquals(1, log.size(), "one line for 127.0.0.1, however many it sent: " + log);
            assertTrue(log.get(0).startsWith(RefusalLog.PREFIX + "a peer listener from 127.0.0.1:"), log.get(0));
        }
    }

    @Test
    void aProcessWithAnotherTokenCannotConnectAndIsToldWhy() {
        JobToken other = JobToken.generate();
        try (PeerListener here = PeerListener.open(7, TOKEN, LOOPBACK, new RefusalLog(line -> { }));
             PeerListener stranger = PeerListener.open(7, other, LOOPBACK, new RefusalLog(line -> { }))) {
            long start = System.nanoTime();
            CommException e = assertThrows(CommException.class,
                    () -> stranger.connect(here.address(LOOPBACK), "g1/world", 0, 1, TIMEOUT));
            assertTrue((System.nanoTime() - start) / 1e9 < 5, "at once, not after the timeout");
            assertTrue(e.getMessage().contains("is not a process of this job") && e.getMessage().contains("FSDP4J_JOB_TOKEN"),
                    e.getMessage());
            Map<String, String> env = new java.util.HashMap<>();
            other.exportTo(env);
            assertFalse(e.getMessage().contains(env.get(JobToken.VARIABLE)), "the token leaked: " + e.getMessage());
        }
    }

    @Test
    void aConnectionThatSaysNothingIsDroppedAfterTheHandshakeLimit() throws IOException, InterruptedException {
        try (PeerListener here = PeerListener.open(7, TOKEN, LOOPBACK, new RefusalLog(line -> { }));
             Socket silent = new Socket(LOOPBACK, here.port())) {
            long start = System.nanoTime();
            silent.setSoTimeout(20_000);
            assertEquals(-1, silent.getInputStream().read(), "the listener hangs up on it");
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(seconds >= Handshake.ACCEPT_LIMIT.toSeconds() - 1 && seconds < Handshake.ACCEPT_LIMIT.toSeconds() + 3,
                    "took " + seconds + " s");
            awaitRefused(here, 1);
        }
    }
}
