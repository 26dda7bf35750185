// The rendezvous store's server: a key-value map that the process of rank 0 serves on
// MASTER_ADDR:MASTER_PORT to every process of the run, as PyTorch's TCPStore does. It is where
// the processes find each other (each one's listening address), check that they were started
// with the same configuration, agree on a stop at a step boundary and leave the reason for an
// abort. One thread per client (a run has tens of processes, not thousands); a get waits on the
// server for its key, up to the timeout the client gave. Every connection opens with the job's
// Handshake: one that does not prove the job's token (or sends garbage, or stalls) is closed, said
// once per remote address on stderr, and the job goes on. A client that sends something that is
// not a request gets an error response and is dropped; the others are not disturbed.
// Liveness: a connection that sets "alive/NAME" owns that key; if the connection ends before it
// deletes the key (its process was killed), the server replaces it with "dead/NAME" and sets
// "dead" to NAME (the first), so the others can tell a dead process from a slow one. A hang-up
// is noticed when the request in progress on that connection ends (a wait of ProcessGroup's is
// at most a second).
package org.fsdp4j.dist;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.fsdp4j.comm.Handshake;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.RefusalLog;
import org.fsdp4j.dist.StoreProtocol.Request;
import org.fsdp4j.dist.StoreProtocol.Status;

public final class StoreServer implements AutoCloseable {

    /** The most clients served at once: beyond it a connection is refused with an error. */
    static final int MAX_CLIENTS = 4096;

    private static final AtomicInteger IDS = new AtomicInteger();
    /** Keys whose connection's end marks their owner dead (see the file comment). */
    static final String ALIVE = "alive/";

    private final ServerSocket socket;
    private final JobToken token;
    private final RefusalLog refusals;
    private final Thread acceptor;
    private final Map<String, byte[]> values = new HashMap<>();     // guarded by lock
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final Set<Socket> clients = ConcurrentHashMap.newKeySet();
    private final AtomicLong droppedClients = new AtomicLong();
    private final AtomicLong refusedClients = new AtomicLong();
    private volatile boolean closed;

    private StoreServer(ServerSocket socket, JobToken token, RefusalLog refusals) {
        this.socket = socket;
        this.token = token;
        this.refusals = refusals;
        this.acceptor = new Thread(this::acceptLoop, "fsdp4j-store-" + IDS.incrementAndGet());
        this.acceptor.setDaemon(true);
        this.acceptor.start();
    }

    /**
     * Serves on {@code port} (0: a free port) of {@code bind} (the wildcard address: every
     * interface) to the processes that prove {@code token}; refused connections go to {@code
     * refusals}. Throws a RendezvousException that says what to do when the port is taken.
     */
    public static StoreServer start(InetAddress bind, int port, JobToken token, RefusalLog refusals) {
        ServerSocket s = null;
        try {
            s = new ServerSocket();
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress(bind, port), 128);
            return new StoreServer(s, token, refusals);
        } catch (IOException e) {
            if (s != null) {
                try {
                    s.close();
                } catch (IOException ignored) {
                    // nothing was served
                }
            }
            throw new RendezvousException("cannot serve the rendezvous store on " + bind.getHostAddress() + " port "
                    + port + ": " + e.getMessage()
                    + " (another run, or an earlier one still exiting, holds it: pick another --master-port"
                    + " or MASTER_PORT)", e);
        }
    }

    /** The port it serves on. */
    public int port() {
        return socket.getLocalPort();
    }

    /** Clients dropped for sending something that is not a request (for tests and logs). */
    public long droppedClients() {
        return droppedClients.get();
    }

    /** Connections closed because their handshake failed (no token, a wrong one, garbage, a stall). */
    public long refusedClients() {
        return refusedClients.get();
    }

    private void acceptLoop() {
        while (!closed) {
            Socket client;
            try {
                client = socket.accept();
            } catch (IOException e) {
                if (closed) {
                    return;
                }
                continue;       // a failed accept (the client gave up): keep serving
            }
            if (clients.size() >= MAX_CLIENTS) {
                closeQuietly(client);       // before the handshake nothing may be said to it; a process retries
                continue;
            }
            clients.add(client);
            Thread t = new Thread(() -> serve(client), acceptor.getName() + "-client");
            t.setDaemon(true);
            t.start();
        }
    }

    private static void closeQuietly(Socket client) {
        try {
            client.close();
        } catch (IOException ignored) {
            // it is being turned away anyway
        }
    }

    /** The job's handshake on a new connection; false (it is logged, and closed by the caller) when it failed. */
    private boolean admitted(Socket client) {
        try {
            Handshake.accept(client, token, Handshake.Kind.STORE, Handshake.ACCEPT_LIMIT);
            return true;
        } catch (IOException e) {
            refusedClients.incrementAndGet();
            if (!closed) {
                refusals.refused("the rendezvous store", client.getRemoteSocketAddress(),
                        e instanceof Handshake.Failed ? e.getMessage() : "the connection failed during the handshake");
            }
            return false;
        }
    }

    private void serve(Socket client) {
        java.util.Set<String> owned = new java.util.HashSet<>();     // "alive/..." keys this connection set
        try (client) {
            client.setTcpNoDelay(true);
            if (!admitted(client)) {
                return;
            }
            DataInputStream in = new DataInputStream(new BufferedInputStream(client.getInputStream()));
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(client.getOutputStream()));
            while (!closed) {
                Request r;
                try {
                    r = StoreProtocol.readRequest(in);
                } catch (StoreProtocol.MalformedException e) {
                    droppedClients.incrementAndGet();
                    StoreProtocol.writeResponse(out, Status.ERROR,
                            ("dropped: " + e.getMessage()).getBytes(StandardCharsets.UTF_8));
                    return;
                }
                if (r == null) {
                    return;     // the client hung up between requests
                }
                if (r.key().startsWith(ALIVE)) {
                    if (r.op() == StoreProtocol.Op.SET) {
                        owned.add(r.key());
                    } else if (r.op() == StoreProtocol.Op.DELETE) {
                        owned.remove(r.key());
                    }
                }
                answer(r, out);
            }
        } catch (IOException e) {
            // the client went away mid-request or mid-response: only its own connection ends
        } finally {
            clients.remove(client);
            buryOwnedKeys(owned);
        }
    }

    /** The connection that held these "alive/" keys ended without deleting them: its process is gone. */
    private void buryOwnedKeys(java.util.Set<String> owned) {
        if (owned.isEmpty() || closed) {
            return;
        }
        lock.lock();
        try {
            for (String key : owned) {
                if (values.remove(key) != null) {
                    String name = key.substring(ALIVE.length());
                    values.put("dead/" + name, new byte[] {'1'});
                    values.putIfAbsent("dead", name.getBytes(StandardCharsets.UTF_8));
                }
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private void answer(Request r, DataOutputStream out) throws IOException {
        byte[] payload = new byte[0];
        Status status = Status.OK;
        lock.lock();
        try {
            switch (r.op()) {
                case SET -> {
                    values.put(r.key(), r.value());
                    changed.signalAll();
                }
                case GET -> {
                    long remaining = TimeUnit.MILLISECONDS.toNanos(r.argument());
                    byte[] v = values.get(r.key());
                    while (v == null && remaining > 0 && !closed) {
                        remaining = changed.awaitNanos(remaining);
                        v = values.get(r.key());
                    }
                    if (v == null) {
                        status = Status.TIMEOUT;
                    } else {
                        payload = v;
                    }
                }
                case ADD -> {
                    byte[] v = values.get(r.key());
                    long now;
                    try {
                        now = Math.addExact(v == null ? 0 : Long.parseLong(new String(v, StandardCharsets.UTF_8)),
                                r.argument());
                    } catch (NumberFormatException | ArithmeticException e) {
                        status = Status.ERROR;
                        payload = ("key '" + r.key() + "' does not hold an integer to add to").getBytes(StandardCharsets.UTF_8);
                        break;
                    }
                    payload = Long.toString(now).getBytes(StandardCharsets.UTF_8);
                    values.put(r.key(), payload);
                    changed.signalAll();
                }
                case COMPARE_SET -> {
                    byte[] v = values.get(r.key());
                    boolean matches = v == null ? r.value().length == 0 : Arrays.equals(v, r.value());
                    if (matches) {
                        values.put(r.key(), r.value2());
                        changed.signalAll();
                        payload = r.value2();
                    } else {
                        payload = v == null ? new byte[0] : v;
                    }
                }
                case CHECK -> status = values.containsKey(r.key()) ? Status.OK : Status.NOT_FOUND;
                case DELETE -> values.remove(r.key());
                default -> throw new IllegalStateException("unhandled store operation " + r.op());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            status = Status.ERROR;
            payload = "the store is shutting down".getBytes(StandardCharsets.UTF_8);
        } finally {
            lock.unlock();
        }
        StoreProtocol.writeResponse(out, status, payload);
    }

    /** Stops serving and hangs up on every client. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        for (Socket c : clients) {
            try {
                c.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
        lock.lock();
        try {
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        try {
            acceptor.join(1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
