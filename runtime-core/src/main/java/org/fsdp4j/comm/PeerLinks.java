// One rank's links, for one communicator, to the members of its group in other processes, and
// the loop that moves a collective's frames over them. A link is a TCP connection, and for a peer
// on the same host also a pair of shared-memory rings (ShmPipe) that carry its bytes instead,
// the connection then only telling when the peer's process dies. A collective queues what it
// sends and what it expects from each peer, then run() drives every link at once without
// blocking (so two ranks that send to each other never wait on each other's buffers) until all
// frames have gone and come, straight from and into the tensors' memory: connections by one
// selector, rings by polling them, spinning briefly and then sleeping in short naps while
// nothing moves. Each header that arrives is checked against the frame expected before its
// payload is read (see Wire). The loop ends with a CommException that names the peer when a
// header does not match, a peer's connection ends, the group is aborted, or the collective's
// deadline passes (the watchdog).
package org.fsdp4j.comm;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntFunction;
import java.util.function.Supplier;

final class PeerLinks implements AutoCloseable {

    /** How often a waiting loop looks at the group's fate even if no socket stirs. */
    private static final long POLL_MILLIS = 200;
    /** Ring polls without progress spent spinning, then yielding, before the loop naps. */
    private static final int SPINS = 64;
    private static final int YIELDS = 128;
    /** The nap between ring polls once idle (the kernel's timer slack adds ~50 µs). */
    private static final long NAP_NANOS = 20_000;
    /** Ring polls between looks at the connections while rings are moving. */
    private static final int SELECT_EVERY = 64;

    /**
     * A test hook for the fault matrix: with -Dfsdp4j.test.resetPeerConnectionAt=K, the K-th
     * collective this process moves over links first resets one of its connections (RST, as a
     * network fault does), so that both ends meet a real reset. Unset in every real run.
     */
    private static final long RESET_AT = Fsdp4jSystemProperties.testResetPeerConnectionAt();
    private static final java.util.concurrent.atomic.AtomicLong RUNS = new java.util.concurrent.atomic.AtomicLong();

    private record Outgoing(ByteBuffer header, ByteBuffer payload) {
    }

    private record Incoming(Wire.Frame expected, ByteBuffer payload) {
    }

    /** One connection and what the running collective still has to move over it. */
    private static final class Link {
        final int peer;                 // the peer's member index in the communicator
        final SocketChannel channel;
        final ShmPipe pipe;             // carries the bytes when set; the channel then only watches for the peer's end
        final SelectionKey key;
        final ArrayDeque<Outgoing> out = new ArrayDeque<>();
        final ArrayDeque<Incoming> in = new ArrayDeque<>();
        final ByteBuffer header = ByteBuffer.allocate(Wire.HEADER_BYTES);
        boolean headerRead;             // header holds the current incoming frame's (checked) header

        Link(int peer, SocketChannel channel, ShmPipe pipe, SelectionKey key) {
            this.peer = peer;
            this.channel = channel;
            this.pipe = pipe;
            this.key = key;
        }

        int read(ByteBuffer dst) throws IOException {
            return pipe != null ? pipe.read(dst) : channel.read(dst);
        }

        long write(ByteBuffer[] srcs) throws IOException {
            return pipe != null ? pipe.write(srcs) : channel.write(srcs);
        }

        boolean busy() {
            return !out.isEmpty() || !in.isEmpty();
        }
    }

    private final Selector selector;
    private final Map<Integer, Link> links = new LinkedHashMap<>();
    private final IntFunction<String> describe;     // member index → "rank 2 (process 1)"
    private final ByteBuffer watch = ByteBuffer.allocate(1);
    private boolean running;                        // run() may touch the rings now (guarded by this)
    private boolean closed;                         // close() was called (guarded by this); the rings go once !running

    /**
     * Takes over {@code channels} (member index → connected channel) and {@code pipes} (member
     * index → rings, for the peers that share this host; the others' bytes go over their channel).
     */
    PeerLinks(Map<Integer, SocketChannel> channels, Map<Integer, ShmPipe> pipes, IntFunction<String> describe) {
        this.describe = describe;
        try {
            this.selector = Selector.open();
            for (Map.Entry<Integer, SocketChannel> e : channels.entrySet()) {
                SocketChannel ch = e.getValue();
                ch.configureBlocking(false);
                Link l = new Link(e.getKey(), ch, pipes.get(e.getKey()), ch.register(selector, 0));
                l.key.attach(l);
                links.put(e.getKey(), l);
            }
        } catch (IOException e) {
            channels.values().forEach(PeerListener::closeQuietly);
            throw new CommException("cannot set up the connections: " + e.getMessage(), e);
        }
    }

    /** How many of the links carry their bytes through shared memory. */
    int sharedMemoryLinks() {
        return (int) links.values().stream().filter(l -> l.pipe != null).count();
    }

    /** Queues {@code payload} (its remaining bytes) as one frame to member {@code peer}. */
    void send(int peer, Wire.Frame header, ByteBuffer payload) {
        link(peer).out.add(new Outgoing(header.encode(), payload));
    }

    /** Expects one frame like {@code expected} from member {@code peer}, its payload read into {@code payload}. */
    void receive(int peer, Wire.Frame expected, ByteBuffer payload) {
        if (payload.remaining() != expected.payloadBytes()) {
            throw new IllegalStateException("frame of " + expected.payloadBytes() + " bytes into " + payload.remaining());
        }
        link(peer).in.add(new Incoming(expected, payload));
    }

    /** Queues a message of bytes.remaining() bytes to {@code peer} as Wire's frames, numbered from {@code firstIndex}. */
    void sendMessage(int peer, Wire.Frame collective, ByteBuffer bytes, int firstIndex) {
        long total = bytes.remaining();
        int base = bytes.position();
        for (int i = 0; i < Wire.frameCount(total); i++) {
            int len = Wire.frameBytes(total, i);
            send(peer, collective.frame(firstIndex + i, len), bytes.slice(base + i * Wire.MAX_FRAME_BYTES, len));
        }
    }

    /** Expects a message of into.remaining() bytes from {@code peer}, read into {@code into}. */
    void receiveMessage(int peer, Wire.Frame collective, ByteBuffer into, int firstIndex) {
        long total = into.remaining();
        int base = into.position();
        for (int i = 0; i < Wire.frameCount(total); i++) {
            int len = Wire.frameBytes(total, i);
            receive(peer, collective.frame(firstIndex + i, len), into.slice(base + i * Wire.MAX_FRAME_BYTES, len));
        }
    }

    /**
     * Moves every queued frame. {@code where} labels errors; the loop gives up {@code timeout}
     * after {@code startNanos} (System.nanoTime()) naming the peers still owing frames, and at
     * once when {@code aborted} returns a cause (the group's).
     */
    void run(String where, long startNanos, java.time.Duration timeout, Supplier<CommException> aborted) {
        long deadlineNanos = startNanos + timeout.toNanos();
        synchronized (this) {
            if (closed) {
                throw closedNow(where, aborted, null);
            }
            running = true;
        }
        if (RESET_AT > 0 && RUNS.incrementAndGet() == RESET_AT && !links.isEmpty()) {
            resetConnection(links.values().iterator().next());
        }
        try {
            int idle = 0;
            int sinceSelect = 0;
            while (true) {
                CommException cause = aborted.get();
                if (cause != null) {
                    throw new CommException(where + ": group aborted: " + cause.getMessage(), cause);
                }
                boolean busy = false;
                boolean ringsBusy = false;
                for (Link l : links.values()) {
                    boolean owing = l.busy();
                    int ops = l.pipe != null ? (owing ? SelectionKey.OP_READ : 0)      // a ring's connection: its end
                            : (l.out.isEmpty() ? 0 : SelectionKey.OP_WRITE) | (l.in.isEmpty() ? 0 : SelectionKey.OP_READ);
                    busy |= owing;
                    ringsBusy |= owing && l.pipe != null;
                    if (l.key.isValid()) {
                        l.key.interestOps(ops);
                    } else if (ops != 0) {
                        throw lost(where, l, null);
                    }
                }
                if (!busy) {
                    return;
                }
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    throw timedOut(where, timeout);
                }
                if (!ringsBusy) {
                    selector.select(Math.max(1, Math.min(POLL_MILLIS, left / 1_000_000)));
                    serveSelected(where);
                    continue;
                }
                boolean moved = false;
                for (Link l : links.values()) {
                    if (l.pipe != null && l.busy()) {
                        moved |= write(where, l) | read(where, l);
                    }
                }
                if (!moved || ++sinceSelect >= SELECT_EVERY) {       // the connections: other peers' bytes, a peer's end
                    sinceSelect = 0;
                    if (selector.selectNow() > 0) {
                        serveSelected(where);
                        moved = true;
                    }
                }
                idle = moved ? 0 : idle + 1;
                if (idle == 0) {
                    continue;
                }
                if (idle < SPINS) {
                    Thread.onSpinWait();
                } else if (idle < SPINS + YIELDS) {
                    Thread.yield();
                } else {
                    LockSupport.parkNanos(NAP_NANOS);
                }
            }
        } catch (IOException | ClosedSelectorException e) {
            throw closedNow(where, aborted, e);
        } finally {
            for (Link l : links.values()) {   // a failed collective leaves nothing queued for the next
                l.out.clear();
                l.in.clear();
                l.headerRead = false;
                l.header.clear();
            }
            synchronized (this) {
                running = false;
                if (closed) {
                    releaseRings();
                }
            }
        }
    }

    private CommException closedNow(String where, Supplier<CommException> aborted, Exception e) {
        CommException cause = aborted.get();
        if (cause != null) {
            return new CommException(where + ": group aborted: " + cause.getMessage(), cause);
        }
        return new CommException(where + ": the connections were closed" + (e == null ? "" : " (" + e + ")"), e);
    }

    /** Serves the connections the last select found ready: a TCP link's bytes, a ring link's end of connection. */
    private void serveSelected(String where) {
        for (SelectionKey k : selector.selectedKeys()) {
            Link l = (Link) k.attachment();
            if (l.pipe != null) {
                if (k.isValid() && k.isReadable()) {
                    watch(where, l);
                }
                continue;
            }
            if (k.isValid() && k.isReadable()) {
                read(where, l);
            }
            if (k.isValid() && k.isWritable()) {
                write(where, l);
            }
        }
        selector.selectedKeys().clear();
    }

    /** A ring link's connection stirred: its peer's process ended (anything else on it breaks the protocol). */
    private void watch(String where, Link l) {
        try {
            watch.clear();
            int n = l.channel.read(watch);
            if (n < 0) {
                throw lost(where, l, null);
            }
            if (n > 0) {
                throw new CommException(where + ": " + describe.apply(l.peer) + " sent bytes over the connection beside"
                        + " its shared-memory rings; dropping it and aborting the group");
            }
        } catch (IOException e) {
            throw lost(where, l, e);
        }
    }

    /** Reads what has arrived on {@code l} into its expected frames; returns whether any byte moved. */
    private boolean read(String where, Link l) {
        boolean moved = false;
        try {
            while (!l.in.isEmpty()) {
                Incoming next = l.in.peek();
                if (!l.headerRead) {
                    int n = l.read(l.header);
                    if (n < 0) {
                        throw lost(where, l, null);
                    }
                    moved |= n > 0;
                    if (l.header.hasRemaining()) {
                        return moved;
                    }
                    check(where, l, next.expected());
                    l.headerRead = true;
                }
                if (next.payload().hasRemaining()) {
                    int n = l.read(next.payload());
                    if (n < 0) {
                        throw lost(where, l, null);
                    }
                    moved |= n > 0;
                }
                if (next.payload().hasRemaining()) {
                    return moved;
                }
                l.in.poll();
                l.headerRead = false;
                l.header.clear();
            }
            return moved;
        } catch (IOException e) {
            throw lost(where, l, e);
        }
    }

    /** Writes {@code l}'s queued frames as far as its buffer takes them; returns whether any byte moved. */
    private boolean write(String where, Link l) {
        boolean moved = false;
        try {
            while (!l.out.isEmpty()) {
                Outgoing o = l.out.peek();
                moved |= l.write(new ByteBuffer[] {o.header(), o.payload()}) > 0;
                if (o.header().hasRemaining() || o.payload().hasRemaining()) {
                    return moved;      // the socket's buffer (or the ring) is full: wait until it drains
                }
                l.out.poll();
            }
            return moved;
        } catch (IOException e) {
            throw lost(where, l, e);
        }
    }

    /** The header just read must be the expected frame's: anything else names both sides. */
    private void check(String where, Link l, Wire.Frame expected) {
        Wire.Frame got = Wire.Frame.read(l.header.flip());
        l.header.position(l.header.limit());
        if (got == null) {
            throw new CommException(where + ": " + describe.apply(l.peer) + " sent bytes that are not an fsdp4j frame"
                    + String.format(" (magic 0x%08x)", l.header.getInt(0)) + "; dropping it and aborting the group");
        }
        if (!got.sameCollective(expected)) {
            throw new CommException(where + ": ranks disagree on the collective: this rank runs " + expected.describe()
                    + ", " + describe.apply(l.peer) + " sent " + got.describe()
                    + (got.op() == expected.op() && got.count() == expected.count() && got.seq() == expected.seq()
                            && got.dtype() == expected.dtype() ? " with another reduction or root" : ""));
        }
        if (got.index() != expected.index() || got.payloadBytes() != expected.payloadBytes()) {
            throw new CommException(where + ": " + describe.apply(l.peer) + " sent frame " + got.index() + " of "
                    + got.payloadBytes() + " bytes where frame " + expected.index() + " of " + expected.payloadBytes()
                    + " belongs; dropping it and aborting the group");
        }
    }

    private RuntimeException lost(String where, Link l, IOException e) {
        boolean reset = e != null && e.getMessage() != null && e.getMessage().contains("reset");
        return new LostPeerException(where + ": lost the connection to " + describe.apply(l.peer)
                + (reset ? ": it was reset (a network fault, or its process died)"
                        : (e == null || e.getMessage() == null ? "" : " (" + e.getMessage() + ")")
                                + ": its process died or closed it"), l.peer, e);
    }

    /** The test hook's reset (see RESET_AT): linger 0 makes close send RST instead of FIN. */
    private static void resetConnection(Link l) {
        System.err.println("fsdp4j-test: resetting a peer connection");
        try {
            l.channel.socket().setSoLinger(true, 0);
            l.channel.close();
        } catch (IOException e) {
            // closed already
        }
    }

    private CommException timedOut(String where, java.time.Duration timeout) {
        List<String> owing = new ArrayList<>();
        for (Link l : links.values()) {
            if (!l.in.isEmpty()) {
                owing.add(describe.apply(l.peer));
            }
        }
        if (owing.isEmpty()) {
            for (Link l : links.values()) {
                if (!l.out.isEmpty()) {
                    owing.add(describe.apply(l.peer) + " (not reading)");
                }
            }
        }
        return new CommException(where + ": " + String.join(", ", owing) + " did not arrive within "
                + timeout.toSeconds() + " s (--collective-timeout); aborting the group");
    }

    /** A peer's connection ended: the caller asks the run for the reason its process left, if it gave one. */
    static final class LostPeerException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int peer;

        LostPeerException(String message, int peer, Throwable cause) {
            super(message, cause);
            this.peer = peer;
        }
    }

    private Link link(int peer) {
        Link l = links.get(peer);
        if (l == null) {
            throw new IllegalStateException("no connection to member " + peer);
        }
        return l;
    }

    /**
     * Closes every connection and wakes a running loop (which then fails); the rings are
     * released here, or by the running loop as it leaves. Idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            if (!running) {
                releaseRings();
            }
        }
        for (Link l : links.values()) {
            PeerListener.closeQuietly(l.channel);
        }
        try {
            selector.wakeup();
            selector.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }

    /** Unmaps every ring; only once no loop can touch them (closed, and run() not inside). */
    private void releaseRings() {
        for (Link l : links.values()) {
            if (l.pipe != null) {
                l.pipe.release();
            }
        }
    }
}
