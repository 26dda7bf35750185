// A client of the rendezvous store (StoreServer): set, get (waiting for the key), add,
// compare-and-set, check, delete and a barrier, every call bounded by a timeout. Connecting
// retries until its timeout, since the process of rank 0 may start its server after the others
// start; it opens with the job's Handshake, and a store that refuses this process's token (or is
// not this job's) ends the connecting at once, since waiting cannot change that. One request at
// a time per client (its methods are synchronized); threads that must not wait for each other
// use clients of their own.
package org.fsdp4j.dist;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.comm.Handshake;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.NetReasons;
import org.fsdp4j.dist.StoreProtocol.Op;
import org.fsdp4j.dist.StoreProtocol.Request;
import org.fsdp4j.dist.StoreProtocol.Response;
import org.fsdp4j.dist.StoreProtocol.Status;

public final class StoreClient implements AutoCloseable {

    /** How much longer than a call's own wait the client waits for the server's answer. */
    private static final Duration ANSWER_SLACK = Duration.ofSeconds(10);
    private static final byte[] NONE = new byte[0];

    /** A get that timed out: the key was not set in time. */
    public static final class TimeoutException extends RendezvousException {
        private static final long serialVersionUID = 1L;

        TimeoutException(String message) {
            super(message);
        }
    }

    private final String host;
    private final int port;
    private final Duration timeout;
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private volatile boolean closed;

    private StoreClient(String host, int port, Duration timeout, Socket socket) throws IOException {
        this.host = host;
        this.port = port;
        this.timeout = timeout;
        this.socket = socket;
        socket.setTcpNoDelay(true);
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
        this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
    }

    /**
     * Connects to the store at host:port as a process holding {@code token}, retrying until
     * {@code timeout} (the server may not be up yet). {@code timeout} is also the bound of every
     * call that does not give its own.
     */
    public static StoreClient connect(String host, int port, Duration timeout, JobToken token) {
        return connect(host, port, timeout, token, null);
    }

    /**
     * As {@link #connect(String, int, Duration, JobToken)}; while the store does not answer,
     * {@code waiting} gets, every so often (WaitNotices), how far the wait is ("10 s of 600 s")
     * and why the last try failed, so that the process can say whom it waits for.
     */
    static StoreClient connect(String host, int port, Duration timeout, JobToken token,
                               java.util.function.BiConsumer<String, String> waiting) {
        WaitNotices notices = new WaitNotices(timeout);
        long deadline = System.nanoTime() + timeout.toNanos();
        IOException last = null;
        long pauseMillis = 20;
        while (true) {
            Socket s = new Socket();
            try {
                long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
                s.connect(new InetSocketAddress(InetAddress.getByName(host), port), (int) Math.min(left, 10_000));
                long handshakeLeft = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
                Handshake.open(s, token, Handshake.Kind.STORE,
                        Duration.ofMillis(Math.min(handshakeLeft, Handshake.OPEN_LIMIT.toMillis())));
                return new StoreClient(host, port, timeout, s);
            } catch (Handshake.Failed e) {
                closeQuietly(s);
                if (e.definitive()) {
                    throw new RendezvousException(refusal(host + ":" + port, e, token), e);
                }
                last = e;           // it hung up or stalled (a store shutting down, or full): try again
            } catch (UnknownHostException e) {
                closeQuietly(s);
                throw new RendezvousException("the master address '" + host + "' does not resolve: check --master-addr"
                        + " or MASTER_ADDR", e);
            } catch (IOException e) {      // refused (not up yet), timed out: try again
                closeQuietly(s);
                last = e;
            }
            if (System.nanoTime() >= deadline) {
                throw new RendezvousException("cannot reach the rendezvous store at " + host + ":" + port + " within "
                        + seconds(timeout) + " (" + NetReasons.of(last) + "): is process 0, which serves it, running, and"
                        + " are --master-addr/MASTER_ADDR and --master-port/MASTER_PORT the same for every process?", last);
            }
            if (waiting != null) {
                IOException lastTry = last;
                notices.due().ifPresent(progress -> waiting.accept(progress, NetReasons.of(lastTry)));
            }
            sleep(pauseMillis);
            pauseMillis = Math.min(500, pauseMillis * 2);
        }
    }

    /** Why the store at {@code where} is not this job's, in words that never show the token. */
    static String refusal(String where, Handshake.Failed e, JobToken token) {
        String how = "give every process of the job the same token (" + JobToken.VARIABLE + " or "
                + JobToken.FILE_VARIABLE + "; fsdp4j launch gives its processes one)";
        if (e.reason() == Handshake.Reason.NOT_FSDP4J) {
            return "what answers at " + where + " is not an fsdp4j rendezvous store (" + e.getMessage() + "): is another"
                    + " program using the master port? Pick another --master-port or MASTER_PORT";
        }
        if (token.isNone() && e.otherHasToken()) {
            return "the rendezvous store at " + where + " belongs to a job with a token and this process has none: "
                    + how + ", or pick another --master-port if that is another job";
        }
        if (!token.isNone() && !e.otherHasToken()) {
            return "the rendezvous store at " + where + " belongs to a job without a token and this process has one: "
                    + how + ", or pick another --master-port if that is another job";
        }
        return "the rendezvous store at " + where + " belongs to another job (" + e.getMessage() + "): its processes"
                + " hold another job token. If it is this job's, " + how + "; if not, pick another --master-port or"
                + " MASTER_PORT";
    }

    /** host:port of the store. */
    public String address() {
        return host + ":" + port;
    }

    /** This end's address on the interface that reaches the store: where the other processes can reach this one. */
    public InetAddress localAddress() {
        return socket.getLocalAddress();
    }

    public void set(String key, byte[] value) {
        call(new Request(Op.SET, key, value, NONE, 0), timeout);
    }

    public void set(String key, String value) {
        set(key, value.getBytes(StandardCharsets.UTF_8));
    }

    /** The value of {@code key}, waiting up to {@code wait} for some process to set it; TimeoutException if none did. */
    public byte[] get(String key, Duration wait) {
        Response r = call(new Request(Op.GET, key, NONE, NONE, Math.max(0, wait.toMillis())), wait);
        if (r.status() == Status.TIMEOUT) {
            throw new TimeoutException("rendezvous store " + address() + ": key '" + key + "' was not set within "
                    + seconds(wait));
        }
        return r.payload();
    }

    public String getString(String key, Duration wait) {
        return new String(get(key, wait), StandardCharsets.UTF_8);
    }

    /** key += delta (a missing key counts as 0); the value after the addition. */
    public long add(String key, long delta) {
        return Long.parseLong(call(new Request(Op.ADD, key, NONE, NONE, delta), timeout).text());
    }

    /**
     * If key holds {@code expected} (a missing key matches an empty array), sets it to
     * {@code desired}. Returns the value key holds afterwards: {@code desired} if it was set.
     */
    public byte[] compareSet(String key, byte[] expected, byte[] desired) {
        return call(new Request(Op.COMPARE_SET, key, expected, desired, 0), timeout).payload();
    }

    public boolean check(String key) {
        return call(new Request(Op.CHECK, key, NONE, NONE, 0), timeout).status() == Status.OK;
    }

    public void delete(String key) {
        call(new Request(Op.DELETE, key, NONE, NONE, 0), timeout);
    }

    /**
     * Returns once {@code count} participants (0..count−1) have called it with the same name, or
     * throws after {@code wait} naming the participants that did not come. Each name serves once.
     */
    public void barrier(String name, int participant, int count, Duration wait) {
        set(name + "/arrived/" + participant, "1");
        if (add(name + "/count", 1) == count) {
            set(name + "/open", "1");
        }
        try {
            get(name + "/open", wait);
        } catch (TimeoutException e) {
            List<Integer> missing = new ArrayList<>();
            for (int p = 0; p < count; p++) {
                if (!check(name + "/arrived/" + p)) {
                    missing.add(p);
                }
            }
            throw new TimeoutException("barrier '" + name + "': " + (missing.size() == 1 ? "process " : "processes ")
                    + missing.toString().replaceAll("[\\[\\]]", "") + " did not arrive within " + seconds(wait));
        }
    }

    private synchronized Response call(Request request, Duration wait) {
        if (closed) {
            throw new IllegalStateException("the store client for " + address() + " is closed");
        }
        if (request.key().getBytes(StandardCharsets.UTF_8).length > StoreProtocol.MAX_KEY_BYTES
                || request.value().length > StoreProtocol.MAX_VALUE_BYTES
                || request.value2().length > StoreProtocol.MAX_VALUE_BYTES) {
            throw new IllegalArgumentException("store " + request.op() + " of '" + request.key() + "': keys hold at most "
                    + StoreProtocol.MAX_KEY_BYTES + " bytes and values " + StoreProtocol.MAX_VALUE_BYTES);
        }
        // Only a get waits at the server, so only its answer may come later than the client's
        // bound; an instant request unanswered within the bound means the store's process is stuck.
        Duration budget = request.op() == Op.GET ? wait.plus(ANSWER_SLACK) : wait;
        try {
            socket.setSoTimeout((int) Math.max(1, Math.min(Integer.MAX_VALUE, budget.toMillis())));
            StoreProtocol.writeRequest(out, request);
            Response r = StoreProtocol.readResponse(in);
            if (r.status() == Status.ERROR) {
                throw new RendezvousException("rendezvous store " + address() + " refused " + request.op() + " '"
                        + request.key() + "': " + r.text());
            }
            return r;
        } catch (SocketTimeoutException e) {
            closeQuietly(socket);
            closed = true;
            throw new RendezvousException("rendezvous store " + address() + " did not answer " + request.op() + " '"
                    + request.key() + "' within " + seconds(budget), e);
        } catch (IOException e) {
            if (closed) {
                throw new IllegalStateException("the store client for " + address() + " was closed during "
                        + request.op() + " '" + request.key() + "'", e);
            }
            closeQuietly(socket);
            closed = true;
            throw new RendezvousException("lost the rendezvous store at " + address() + " (" + NetReasons.of(e)
                    + "): process 0, which serves it, has ended", e);
        }
    }

    /** Hangs up, also on a call in progress on another thread (which then fails). Idempotent. */
    @Override
    public void close() {
        closed = true;
        closeQuietly(socket);
    }

    static String seconds(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : String.format("%.1f s", d.toMillis() / 1e3);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // already failed
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RendezvousException("interrupted while connecting to the rendezvous store");
        }
    }
}
