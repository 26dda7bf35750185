// The rendezvous store admits only this job's processes, and the job listens only where it lives.
// Intruders (a raw store request, another token, no token, a garbage hello, silence) are closed
// while the job's clients keep working, and 127.0.0.1 is logged once; a process of another job
// (another token) or without the job's token fails to connect at once, told why, never shown a
// token. The store binds the master address (a master address of another host is one clear line;
// FSDP4J_STORE_BIND and FSDP4J_PEER_BIND override); a joined group is not reachable on this host's
// other interfaces. A run that may span hosts without a token stops before it opens a port.
package org.fsdp4j.dist;

import static org.fsdp4j.testing.Sockets.closedWithoutAnswer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.DataOutputStream;
import java.io.IOException;
import java.net.ConnectException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.fsdp4j.comm.Handshake;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.RefusalLog;
import org.junit.jupiter.api.Test;

class StoreAuthTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    /** An address of no host here (TEST-NET-3). */
    private static final String ELSEWHERE = "203.0.113.7";

    private static String text(JobToken t) {
        Map<String, String> env = new HashMap<>();
        t.exportTo(env);
        return env.get(JobToken.VARIABLE);
    }

    /** A non-loopback IPv4 address of this host, if it has one. */
    static Optional<InetAddress> otherLocalAddress() throws IOException {
        for (NetworkInterface ni : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            if (ni.isUp() && !ni.isLoopback()) {
                for (InetAddress a : Collections.list(ni.getInetAddresses())) {
                    if (a instanceof Inet4Address && !a.isLinkLocalAddress()) {
                        return Optional.of(a);
                    }
                }
            }
        }
        return Optional.empty();
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    @Test
    void intrudersAreClosedWhileTheJobsClientsWorkAndOneLineNamesTheirAddress() throws Exception {
        JobToken token = JobToken.generate();
        List<String> log = new CopyOnWriteArrayList<>();
        try (StoreServer server = StoreTest.serve(token, new RefusalLog(log::add));
             StoreClient job = StoreClient.connect("127.0.0.1", server.port(), TIMEOUT, token)) {
            job.set("process/0/address", "127.0.0.1:4000");

            try (Socket raw = new Socket("127.0.0.1", server.port())) {     // a well-formed store request, no handshake
                DataOutputStream out = new DataOutputStream(raw.getOutputStream());
                StoreProtocol.writeRequest(out, new StoreProtocol.Request(StoreProtocol.Op.GET, "process/0/address",
                        new byte[0], new byte[0], 0));
                assertTrue(closedWithoutAnswer(raw), "a request without the handshake gets nothing back");
            }
            try (Socket garbage = new Socket("127.0.0.1", server.port())) {
                garbage.getOutputStream().write("\u0016\u0003\u0001 hello".getBytes(StandardCharsets.ISO_8859_1));
                assertTrue(closedWithoutAnswer(garbage));
            }
            try (Socket wrong = new Socket("127.0.0.1", server.port())) {
                Handshake.Failed f = assertThrows(Handshake.Failed.class,
                        () -> Handshake.open(wrong, JobToken.generate(), Handshake.Kind.STORE, TIMEOUT));
                assertEquals(Handshake.Reason.REFUSED, f.reason());
            }
            try (Socket peerKind = new Socket("127.0.0.1", server.port())) {
                assertThrows(Handshake.Failed.class, () -> Handshake.open(peerKind, token, Handshake.Kind.PEER, TIMEOUT));
            }
            try (Socket silent = new Socket("127.0.0.1", server.port())) {
                long start = System.nanoTime();
                job.set("k", "v");                  // served while the silent one waits out its handshake
                assertEquals("v", job.getString("k", Duration.ZERO));
                assertTrue(closedWithoutAnswer(silent));
                double s = (System.nanoTime() - start) / 1e9;
                assertTrue(s < Handshake.ACCEPT_LIMIT.toSeconds() + 3, "a silent connection is dropped after the limit: " + s);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (server.refusedClients() < 5 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertEquals(5, server.refusedClients());
            assertEquals("127.0.0.1:4000", job.getString("process/0/address", Duration.ZERO), "the job goes on");
            assertEquals(1, log.size(), "once for 127.0.0.1: " + log);
            assertTrue(log.get(0).startsWith("fsdp4j: refused a connection to the rendezvous store from 127.0.0.1:")
                    && log.get(0).endsWith("(further ones from 127.0.0.1 are not logged)"), log.get(0));
            assertFalse(log.get(0).contains(text(token)));
        }
    }

    @Test
    void aProcessOfAnotherJobOrWithoutTheTokenFailsAtOnceAndIsToldWhy() {
        JobToken token = JobToken.generate();
        JobToken other = JobToken.generate();
        try (StoreServer server = StoreTest.serve(token, new RefusalLog(line -> { }))) {
            String[] expected = {"belongs to another job", "belongs to a job with a token and this process has none"};
            JobToken[] tokens = {other, JobToken.NONE};
            for (int i = 0; i < tokens.length; i++) {
                JobToken t = tokens[i];
                long start = System.nanoTime();
                RendezvousException e = assertThrows(RendezvousException.class,
                        () -> StoreClient.connect("127.0.0.1", server.port(), Duration.ofSeconds(60), t));
                assertTrue((System.nanoTime() - start) / 1e9 < 5, "at once, not after the 60 s timeout");
                assertTrue(e.getMessage().contains("rendezvous store at 127.0.0.1:" + server.port() + " " + expected[i])
                        && e.getMessage().contains("FSDP4J_JOB_TOKEN") && e.getMessage().contains("--master-port"),
                        e.getMessage());
                assertFalse(e.getMessage().contains(text(token)) || e.getMessage().contains(text(other)));
            }
        }
        try (StoreServer open = StoreTest.serve(JobToken.NONE, new RefusalLog(line -> { }))) {
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> StoreClient.connect("127.0.0.1", open.port(), TIMEOUT, token));
            assertTrue(e.getMessage().contains("belongs to a job without a token and this process has one"), e.getMessage());
        }
    }

    @Test
    void somethingElseOnTheMasterPortIsNamedAtOnce() throws Exception {
        try (ServerSocket http = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
            Thread t = new Thread(() -> {
                try (Socket s = http.accept()) {
                    s.getOutputStream().write("HTTP/1.1 400 Bad Request\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                    s.getInputStream().read();
                } catch (IOException ignored) {
                    // the client hung up
                }
            });
            t.start();
            RendezvousException e = assertThrows(RendezvousException.class,
                    () -> StoreClient.connect("127.0.0.1", http.getLocalPort(), Duration.ofSeconds(60), JobToken.generate()));
            assertTrue(e.getMessage().contains("is not an fsdp4j rendezvous store"), e.getMessage());
            t.join(5000);
        }
    }

    @Test
    void theStoreBindsTheMasterAddressAndTheOverridesWin() throws Exception {
        ProcessIdentity local = new ProcessIdentity(0, 2, 0, 2, 0, "127.0.0.1", 29500, "a test");
        assertEquals(InetAddress.getByName("127.0.0.1"), ProcessGroup.storeAddress(local));
        assertEquals(InetAddress.getByName("127.0.0.1"), ProcessGroup.storeAddress(
                local.withAccess(new JobAccess(JobToken.NONE, null, null))));

        ProcessIdentity elsewhere = new ProcessIdentity(0, 2, 0, 1, 0, ELSEWHERE, 29500, "a test");
        RendezvousException e = assertThrows(RendezvousException.class, () -> ProcessGroup.storeAddress(elsewhere));
        assertTrue(e.getMessage().contains(ELSEWHERE + ", which is not an address of this host")
                && e.getMessage().contains("FSDP4J_STORE_BIND"), e.getMessage());
        assertEquals(1, e.getMessage().lines().count());
        assertTrue(ProcessGroup.storeAddress(elsewhere.withAccess(new JobAccess(JobToken.NONE, "0.0.0.0", null)))
                .isAnyLocalAddress(), "FSDP4J_STORE_BIND=0.0.0.0: every interface");
        RendezvousException bad = assertThrows(RendezvousException.class, () -> ProcessGroup.storeAddress(
                local.withAccess(new JobAccess(JobToken.NONE, ELSEWHERE, null))));
        assertTrue(bad.getMessage().contains("FSDP4J_STORE_BIND " + ELSEWHERE + ", which is not an address"), bad.getMessage());

        InetAddress towardStore = InetAddress.getByName("127.0.0.1");
        assertEquals(towardStore, ProcessGroup.peerAddress(local, towardStore), "the interface that reaches the store");
        assertTrue(ProcessGroup.peerAddress(local.withAccess(new JobAccess(JobToken.NONE, null, "0.0.0.0")), towardStore)
                .isAnyLocalAddress());
        RendezvousException peer = assertThrows(RendezvousException.class, () -> ProcessGroup.peerAddress(
                local.withAccess(new JobAccess(JobToken.NONE, null, ELSEWHERE)), towardStore));
        assertTrue(peer.getMessage().startsWith("FSDP4J_PEER_BIND " + ELSEWHERE + " is not an address of this host"),
                peer.getMessage());
    }

    @Test
    void aJoinedGroupIsNotReachableOnThisHostsOtherInterfaces() throws Exception {
        Optional<InetAddress> other = otherLocalAddress();
        assumeTrue(other.isPresent(), "this host has no interface but loopback");
        int port = freePort();
        JobToken token = JobToken.generate();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<ProcessGroup> groups = new ArrayList<>();
        try {
            List<Future<ProcessGroup>> joined = new ArrayList<>();
            for (int p = 0; p < 2; p++) {
                ProcessIdentity id = new ProcessIdentity(p, 2, p, 2, 0, "127.0.0.1", port, "a test")
                        .withAccess(JobAccess.NONE.withToken(token));
                joined.add(pool.submit(() -> ProcessGroup.join(id, Map.of(), TIMEOUT)));
            }
            for (Future<ProcessGroup> f : joined) {
                groups.add(f.get(30, TimeUnit.SECONDS));
            }
            for (ProcessGroup g : groups) {
                InetSocketAddress peers = g.addressOf(g.process(), TIMEOUT);
                assertEquals(InetAddress.getByName("127.0.0.1"), peers.getAddress(), "published where the store is reached");
                assertRefused(new InetSocketAddress(other.get(), peers.getPort()));
            }
            assertRefused(new InetSocketAddress(other.get(), port));
            try (Socket s = new Socket("127.0.0.1", port)) {
                assertTrue(s.isConnected(), "the store is up, on loopback only");
            }
        } finally {
            for (int i = groups.size() - 1; i >= 0; i--) {
                ProcessGroup g = groups.get(i);
                pool.submit(g::close);
            }
            pool.shutdown();
            pool.awaitTermination(30, TimeUnit.SECONDS);
        }
    }

    private static void assertRefused(InetSocketAddress at) {
        try (Socket s = new Socket()) {
            s.connect(at, 2000);
            throw new AssertionError("something listens on " + at);
        } catch (ConnectException expected) {
            // nothing bound there
        } catch (IOException e) {
            throw new AssertionError("connecting to " + at + ": " + e, e);
        }
    }

    @Test
    void aRunThatMaySpanHostsWithoutATokenStopsBeforeItOpensAPort() throws Exception {
        int port = freePort();
        ProcessIdentity remote = new ProcessIdentity(1, 2, 0, 1, 1, ELSEWHERE, port, "a test");
        long start = System.nanoTime();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ProcessGroup.join(remote, Map.of(), Duration.ofSeconds(60)));
        assertTrue((System.nanoTime() - start) / 1e9 < 2, "before any connection");
        assertEquals(1, e.getMessage().lines().count());
        assertTrue(e.getMessage().startsWith("the master address " + ELSEWHERE + " is not this host's loopback")
                && e.getMessage().contains("FSDP4J_JOB_TOKEN_FILE") && e.getMessage().contains("openssl rand -hex 32"),
                e.getMessage());

        ProcessIdentity process0 = new ProcessIdentity(0, 2, 0, 1, 0, ELSEWHERE, port, "a test");
        assertThrows(IllegalArgumentException.class, () -> ProcessGroup.join(process0, Map.of(), Duration.ofSeconds(60)));
        try (ServerSocket free = new ServerSocket(port)) {
            assertTrue(free.isBound(), "no store was started");
        }
        // with a token it gets past that check, to the next: process 0 is not on that host
        RendezvousException notHere = assertThrows(RendezvousException.class, () -> ProcessGroup.join(
                process0.withAccess(JobAccess.NONE.withToken(JobToken.generate())), Map.of(), Duration.ofSeconds(60)));
        assertTrue(notHere.getMessage().contains("not an address of this host"), notHere.getMessage());
        // the loopback needs none: every process is on this host
        new ProcessIdentity(1, 2, 0, 1, 1, "localhost", port, "a test").requireTokenAcrossHosts();
    }
}
