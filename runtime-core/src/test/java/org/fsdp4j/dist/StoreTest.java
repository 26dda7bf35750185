// The rendezvous store over real sockets: a get that waits for another client's set and one that
// times out, concurrent clients adding to one key, compare-and-set, a barrier that names who is
// missing, a client that disconnects in the middle (the others are served; a process that dies
// owning "alive/" is marked dead), a client that sends garbage (dropped with an error, nobody
// else disturbed), and a port already taken (one clear line). Every client here proves the job's
// token first (StoreAuthTest has the ones that do not).
package org.fsdp4j.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.fsdp4j.comm.Handshake;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.RefusalLog;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class StoreTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    private static final JobToken TOKEN = JobToken.generate();

    private StoreServer server;

    /** A store on a free loopback port for the processes that hold TOKEN. */
    static StoreServer serve(JobToken token, RefusalLog log) {
        return StoreServer.start(InetAddress.getLoopbackAddress(), 0, token, log);
    }

    @BeforeEach
    void start() {
        server = serve(TOKEN, new RefusalLog(line -> { }));
    }

    /** A raw connection to the store that has passed the job's handshake, to send it anything. */
    private Socket admitted() throws Exception {
        Socket s = new Socket("127.0.0.1", server.port());
        Handshake.open(s, TOKEN, Handshake.Kind.STORE, Handshake.OPEN_LIMIT);
        return s;
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private StoreClient client() {
        return StoreClient.connect("127.0.0.1", server.port(), TIMEOUT, TOKEN);
    }

    @Test
    void getWaitsForAnotherClientsSetAndTimesOutWhenNoneComes() throws Exception {
        try (StoreClient a = client(); StoreClient b = client()) {
            ExecutorService pool = Executors.newSingleThreadExecutor();
            Future<String> waiting = pool.submit(() -> a.getString("nccl/unique-id", Duration.ofSeconds(10)));
            Thread.sleep(200);
            assertFalse(waiting.isDone(), "get must wait for the key");
            b.set("nccl/unique-id", "0123abcd");
            assertEquals("0123abcd", waiting.get());
            pool.shutdown();

            long start = System.nanoTime();
            StoreClient.TimeoutException e = assertThrows(StoreClient.TimeoutException.class,
                    () -> a.get("never", Duration.ofMillis(300)));
            double ms = (System.nanoTime() - start) / 1e6;
            assertTrue(ms >= 250 && ms < 5000, "timed out after " + ms + " ms");
            assertTrue(e.getMessage().contains("'never' was not set within 0.3 s"), e.getMessage());
        }
    }

    @Test
    void concurrentClientsAddAndCompareAndSet() throws Exception {
        int clients = 8;
        int adds = 100;
        ExecutorService pool = Executors.newFixedThreadPool(clients);
        List<Future<?>> done = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            done.add(pool.submit(() -> {
                try (StoreClient s = client()) {
                    for (int i = 0; i < adds; i++) {
                        s.add("counter", 1);
                    }
                    s.compareSet("leader", new byte[0], ("client " + Thread.currentThread().getId()).getBytes(StandardCharsets.UTF_8));
                }
                return null;
            }));
        }
        for (Future<?> f : done) {
            f.get();
        }
        pool.shutdown();
        try (StoreClient s = client()) {
            assertEquals(clients * adds, s.add("counter", 0));
            byte[] leader = s.get("leader", Duration.ZERO);
            // compare-and-set: only the first client's value stands, and a mismatching expectation changes nothing
            assertArrayEquals(leader, s.compareSet("leader", "someone else".getBytes(StandardCharsets.UTF_8), new byte[] {1}));
            assertArrayEquals(new byte[] {1}, s.compareSet("leader", leader, new byte[] {1}));
            assertTrue(s.check("leader"));
            s.delete("leader");
            assertFalse(s.check("leader"));
        }
    }

    @Test
    void aBarrierNamesTheParticipantsThatDidNotCome() {
        try (StoreClient a = client()) {
            StoreClient.TimeoutException e = assertThrows(StoreClient.TimeoutException.class,
                    () -> a.barrier("start", 0, 3, Duration.ofMillis(300)));
            assertTrue(e.getMessage().contains("processes 1, 2 did not arrive"), e.getMessage());
        }
    }

    @Test
    void aClientThatDisconnectsDisturbsNobodyAndOneThatOwnedAliveIsMarkedDead() throws Exception {
        try (StoreClient survivor = client()) {
            StoreClient quitter = client();
            quitter.set(StoreServer.ALIVE + "process 1", "1");
            ExecutorService pool = Executors.newSingleThreadExecutor();
            // the server notices a hang-up when the wait it serves ends (ProcessGroup waits in 1 s slices)
            Future<?> waiting = pool.submit(() -> quitter.get("never", Duration.ofMillis(500)));
            Thread.sleep(100);
            quitter.close();                      // hangs up in the middle of its wait
            assertThrows(Exception.class, waiting::get);
            pool.shutdown();
            assertEquals("process 1", survivor.getString("dead", Duration.ofSeconds(5)));
            assertTrue(survivor.check("dead/process 1"));
            survivor.set("still", "served");
            assertEquals("served", survivor.getString("still", Duration.ZERO));
        }
    }

    @Test
    void aClientThatSendsGarbageIsDroppedWithAnError() throws Exception {
        try (StoreClient good = client(); Socket bad = admitted()) {
            OutputStream out = bad.getOutputStream();
            out.write("GET /index.html HTTP/1.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            DataInputStream in = new DataInputStream(bad.getInputStream());
            assertEquals(StoreProtocol.RESPONSE_MAGIC, in.readInt());
            assertEquals(StoreProtocol.Status.ERROR.code, in.readByte());
            String why = new String(in.readNBytes(in.readInt()), StandardCharsets.UTF_8);
            assertTrue(why.startsWith("dropped: not a store request"), why);
            assertEquals(-1, in.read(), "the server hangs up on it");
            assertEquals(1, server.droppedClients());
            good.set("k", "v");
            assertEquals("v", good.getString("k", Duration.ZERO));
        }
    }

    @Test
    void aLengthBeyondTheBoundsIsRefusedBeforeAnythingIsAllocated() throws Exception {
        try (Socket bad = admitted()) {
            java.io.DataOutputStream out = new java.io.DataOutputStream(bad.getOutputStream());
            out.writeInt(StoreProtocol.REQUEST_MAGIC);
            out.writeByte(StoreProtocol.VERSION);
            out.writeByte(StoreProtocol.Op.SET.code);
            out.writeShort(0);
            out.writeInt(3);
            out.writeInt(Integer.MAX_VALUE);      // a 2 GiB value: refused, not allocated
            out.writeInt(0);
            out.writeLong(0);
            out.flush();
            DataInputStream in = new DataInputStream(bad.getInputStream());
            in.readInt();
            assertEquals(StoreProtocol.Status.ERROR.code, in.readByte());
            String why = new String(in.readNBytes(in.readInt()), StandardCharsets.UTF_8);
            assertTrue(why.contains("value of 2147483647 bytes is outside"), why);
        }
    }

    @Test
    void aTakenPortIsOneClearLine() {
        RendezvousException e = assertThrows(RendezvousException.class, () -> StoreServer.start(
                InetAddress.getLoopbackAddress(), server.port(), TOKEN, new RefusalLog(line -> { })));
        assertTrue(e.getMessage().contains("cannot serve the rendezvous store on 127.0.0.1 port " + server.port()),
                e.getMessage());
        assertTrue(e.getMessage().contains("--master-port"), e.getMessage());
    }

    @Test
    void aClientOfNoServerGivesUpAfterItsTimeoutNamingTheAddress() {
        int port;
        try (StoreServer other = serve(TOKEN, new RefusalLog(line -> { }))) {
            port = other.port();
        }
        long start = System.nanoTime();
        RendezvousException e = assertThrows(RendezvousException.class,
                () -> StoreClient.connect("127.0.0.1", port, Duration.ofMillis(500), TOKEN));
        assertTrue((System.nanoTime() - start) / 1e9 < 5);
        assertTrue(e.getMessage().contains("cannot reach the rendezvous store at 127.0.0.1:" + port), e.getMessage());
    }
}
