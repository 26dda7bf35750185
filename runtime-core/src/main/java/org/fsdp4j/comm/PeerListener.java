// Where the other processes of a run connect to this one. Every connection between two ranks of
// a TcpGroup is opened by the lower rank (Wire's handshake names the run, the communicator and
// both ranks) and accepted here, on a thread of its own, so that no rank ever waits for another
// to reach its accept: the higher rank picks the connection up by its name when it builds the
// same communicator. Every connection first proves the job's token (Handshake, both ways): one
// that does not is closed and said once per remote address on stderr, and the job goes on. After
// it, a connection whose Wire handshake is not fsdp4j's, or from another run, is refused with a
// reason and closed. The listener binds one interface: the one this process reaches the store
// through, unless FSDP4J_PEER_BIND says otherwise (ProcessGroup picks it).
package org.fsdp4j.comm;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

public final class PeerListener implements AutoCloseable {

    /** How long an opening side may take to send its handshake. */
    private static final int HANDSHAKE_TIMEOUT_MILLIS = 10_000;
    private static final byte ACCEPTED = 1;
    private static final byte REFUSED = 0;
    private static final AtomicInteger IDS = new AtomicInteger();

    private final ServerSocketChannel server;
    private final long runId;
    private final JobToken token;
    private final RefusalLog refusals;
    private final Map<String, CompletableFuture<SocketChannel>> arrived = new ConcurrentHashMap<>();
    private final AtomicLong refused = new AtomicLong();
    private final Thread acceptor;
    private volatile boolean closed;

    private PeerListener(ServerSocketChannel server, long runId, JobToken token, RefusalLog refusals) {
        this.server = server;
        this.runId = runId;
        this.token = token;
        this.refusals = refusals;
        this.acceptor = new Thread(this::acceptLoop, "fsdp4j-peers-" + IDS.incrementAndGet());
        this.acceptor.setDaemon(true);
        this.acceptor.start();
    }

    /**
     * Listens on a free port of {@code bind} (the wildcard address: every interface) for
     * connections of run {@code runId} from processes that prove {@code token}; refused
     * connections go to {@code refusals}.
     */
    public static PeerListener open(long runId, JobToken token, InetAddress bind, RefusalLog refusals) {
        ServerSocketChannel s = null;
        try {
            s = ServerSocketChannel.open();
            s.bind(new InetSocketAddress(bind, 0), 256);
            return new PeerListener(s, runId, token, refusals);
        } catch (IOException e) {
            closeQuietly(s);
            throw new CommException("cannot listen for the other processes on " + bind.getHostAddress() + ": "
                    + NetReasons.of(e), e);
        }
    }

    public int port() {
        return server.socket().getLocalPort();
    }

    /** Connections refused so far (a wrong handshake, another run): for tests. */
    public long refused() {
        return refused.get();
    }

    /**
     * Opens the connection named {@code key} from rank {@code from} (here) to rank {@code to},
     * which listens at {@code address}; returns it once the other side has accepted it.
     */
    SocketChannel connect(InetSocketAddress address, String key, int from, int to, Duration timeout) {
        SocketChannel ch = null;
        try {
            ch = SocketChannel.open();
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.socket().connect(address, (int) Math.min(Integer.MAX_VALUE, timeout.toMillis()));
            try {
                Handshake.open(ch.socket(), token, Handshake.Kind.PEER, Handshake.OPEN_LIMIT);
            } catch (Handshake.Failed e) {
                if (!e.definitive()) {
                    throw e;            // it hung up or stalled: reported below as a failed connection
                }
                throw new CommException("rank " + to + " at " + address + " is not a process of this job (" + e.getMessage()
                        + "): give every process the same token (" + JobToken.VARIABLE + " or " + JobToken.FILE_VARIABLE
                        + ")", e);
            }
            ByteBuffer hello = Wire.handshake(runId, key, from, to);
            while (hello.hasRemaining()) {
                ch.write(hello);
            }
            ch.socket().setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeout.toMillis()));
            DataInputStream in = new DataInputStream(ch.socket().getInputStream());
            byte answer = in.readByte();
            if (answer != ACCEPTED) {
                String why = in.readUTF();
                throw new CommException("rank " + to + " at " + address + " refused the connection for '" + key + "': " + why);
            }
            ch.socket().setSoTimeout(0);
            return ch;
        } catch (IOException e) {
            closeQuietly(ch);
            throw new CommException("rank " + from + " cannot connect to rank " + to + " at " + address + " for '" + key
                    + "': " + NetReasons.of(e), e);
        } catch (RuntimeException e) {
            closeQuietly(ch);
            throw e;
        }
    }

    /**
     * The connection named {@code key} that rank {@code from} opens to rank {@code to} (here),
     * waiting for it up to {@code timeout}; gives up early once {@code aborted} says so.
     */
    SocketChannel await(String key, int from, int to, Duration timeout, BooleanSupplier aborted) {
        CompletableFuture<SocketChannel> f = slot(key, from, to);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            try {
                SocketChannel ch = f.get(100, TimeUnit.MILLISECONDS);
                arrived.remove(name(key, from, to));
                return ch;
            } catch (TimeoutException e) {
                if (closed || aborted.getAsBoolean()) {
                    throw new CommException("gave up waiting for rank " + from + " to connect for '" + key + "'");
                }
                if (System.nanoTime() > deadline) {
                    throw new CommException("rank " + from + " did not connect to rank " + to + " for '" + key + "' within "
                            + timeout.toSeconds() + " s");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException("interrupted while waiting for rank " + from + " to connect");
            } catch (ExecutionException e) {
                throw new CommException("the listener stopped: " + e.getCause().getMessage(), e.getCause());
            }
        }
    }

    private CompletableFuture<SocketChannel> slot(String key, int from, int to) {
        return arrived.computeIfAbsent(name(key, from, to), k -> new CompletableFuture<>());
    }

    private static String name(String key, int from, int to) {
        return key + "|" + from + "|" + to;
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel ch;
            try {
                ch = server.accept();
            } catch (IOException e) {
                if (closed) {
                    return;
                }
                continue;
            }
            Thread t = new Thread(() -> handshake(ch), acceptor.getName() + "-handshake");
            t.setDaemon(true);
            t.start();
        }
    }

    /**
     * Checks that the opening side holds the job's token, then reads and checks its Wire handshake,
     * answers it, and files the connection under its name.
     */
    private void handshake(SocketChannel ch) {
        try {
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            try {
                Handshake.accept(ch.socket(), token, Handshake.Kind.PEER, Handshake.ACCEPT_LIMIT);
            } catch (IOException e) {
                refused.incrementAndGet();
                if (!closed) {
                    refusals.refused("a peer listener", ch.socket().getRemoteSocketAddress(),
                            e instanceof Handshake.Failed ? e.getMessage() : "the connection failed during the handshake");
                }
                closeQuietly(ch);
                return;
            }
            ch.socket().setSoTimeout(HANDSHAKE_TIMEOUT_MILLIS);
            InputStream raw = ch.socket().getInputStream();
            DataInputStream in = new DataInputStream(raw);
            int magic = in.readInt();
            if (magic != Wire.HANDSHAKE_MAGIC) {
                refuse(ch, String.format("not an fsdp4j connection (magic 0x%08x)", magic));
                return;
            }
            int version = in.readInt();
            long run = in.readLong();
            int from = in.readInt();
            int to = in.readInt();
            int keyBytes = in.readInt();
            if (version != Wire.VERSION) {
                refuse(ch, "wire version " + version + ", this process speaks " + Wire.VERSION);
                return;
            }
            if (run != runId) {
                refuse(ch, "it belongs to another run");
                return;
            }
            if (keyBytes < 0 || keyBytes > Wire.MAX_KEY_BYTES || from < 0 || to < 0) {
                refuse(ch, "malformed handshake");
                return;
            }
            String key = new String(in.readNBytes(keyBytes), StandardCharsets.UTF_8);
            ch.socket().getOutputStream().write(ACCEPTED);
            ch.socket().setSoTimeout(0);
            if (!slot(key, from, to).complete(ch)) {
                closeQuietly(ch);      // a second connection under one name: keep the first
            }
        } catch (IOException e) {
            refused.incrementAndGet();
            closeQuietly(ch);
        }
    }

    private void refuse(SocketChannel ch, String why) throws IOException {
        refused.incrementAndGet();
        java.io.DataOutputStream out = new java.io.DataOutputStream(ch.socket().getOutputStream());
        out.writeByte(REFUSED);
        out.writeUTF(why);
        out.flush();
        closeQuietly(ch);
    }

    /** Stops accepting; connections already handed out stay with their communicators. Idempotent. */
    @Override
    public void close() {
        closed = true;
        closeQuietly(server);
        for (CompletableFuture<SocketChannel> f : arrived.values()) {
            if (!f.isDone()) {
                f.completeExceptionally(new IOException("the listener closed"));
            } else {
                closeQuietly(f.getNow(null));     // accepted but never picked up
            }
        }
    }

    static void closeQuietly(java.nio.channels.Channel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
    }

    /**
     * Where the other processes reach this listener: the address it is bound to, or, bound to
     * every interface, {@code via} (the address this process reaches the store from).
     */
    public InetSocketAddress address(InetAddress via) {
        InetAddress bound = server.socket().getInetAddress();
        return new InetSocketAddress(bound == null || bound.isAnyLocalAddress() ? via : bound, port());
    }
}
