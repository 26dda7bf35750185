// The same-host path of one connection between two processes: two byte rings (one each way) in
// a file under /dev/shm that both processes map, so a collective's frames move with one memory
// copy on each side and no system call, where TCP over loopback copies through the kernel twice
// and wakes the peer through it. The TCP connection stays open beside the rings and carries no
// data: its end is how a rank learns that its peer's process died.
//
// Set-up, over the connection while it is still quiet: the lower rank writes a ring file (every
// byte, so a full /dev/shm fails here with an error instead of a SIGBUS later), maps it, puts a
// random nonce in it and offers its path; the higher rank maps the path only if it finds the
// nonce there (a peer on another host, or in a container with its own /dev/shm, does not) and
// answers; the lower rank then unlinks the file, whose memory lives on until both unmap it. Any
// refusal leaves the pair on TCP, so a mixed run works. (The file itself: ShmFile.)
//
// Each ring is a single-producer single-consumer byte stream with TCP's semantics (write and read
// move what fits or what is there, never block): the producer's running count of bytes written
// and the consumer's of bytes read sit on separate cache lines, stored with release and loaded
// with acquire, so the bytes a count covers are visible before it is.
package org.fsdp4j.comm;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;

final class ShmPipe {

    /** Bytes in flight one way; a pair of processes holds two rings per communicator. */
    static final int RING_BYTES = 1 << 20;
    private static final int CONTROL_BYTES = 4096;        // head at 0, tail at 128, nonce at 256
    private static final int HEAD = 0;
    private static final int TAIL = 128;
    private static final int NONCE = 256;
    private static final int RING_SPAN = CONTROL_BYTES + RING_BYTES;
    private static final int OFFER_MAGIC = 0x46344A53;    // "F4JS"
    private static final int MAX_PATH_BYTES = 4096;
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    /** One direction: a control page (head, tail) and RING_BYTES of data. */
    private static final class Ring {
        final ByteBuffer control;
        final ByteBuffer data;
        long mine;                      // the producer's head, or the consumer's tail: only this side stores it

        Ring(MappedByteBuffer file, int offset) {
            this.control = file.slice(offset, CONTROL_BYTES);
            this.data = file.slice(offset + CONTROL_BYTES, RING_BYTES);
        }
    }

    private final MappedByteBuffer file;
    private final Ring out;
    private final Ring in;

    ShmPipe(MappedByteBuffer file, boolean opener) {
        this.file = file;
        Ring first = new Ring(file, 0);
        Ring second = new Ring(file, RING_SPAN);
        this.out = opener ? first : second;
        this.in = opener ? second : first;
    }

    /** Moves as many of {@code srcs}' remaining bytes as the outgoing ring has room for; returns how many. */
    long write(ByteBuffer[] srcs) throws IOException {
        long tail = (long) LONGS.getAcquire(out.control, TAIL);
        long room = RING_BYTES - (out.mine - tail);
        // The tail is the peer's word: one past what was written, or a ring's length behind, would overwrite unread bytes or wait forever.
        if (tail > out.mine || room < 0) {
            throw new IOException("the peer's ring count is corrupt (read " + tail + " of " + out.mine + " bytes written)");
        }
        long moved = 0;
        for (ByteBuffer src : srcs) {
            while (room > 0 && src.hasRemaining()) {
                int at = (int) (out.mine & (RING_BYTES - 1));
                int n = (int) Math.min(Math.min(room, src.remaining()), RING_BYTES - at);
                out.data.put(at, src, src.position(), n);
                src.position(src.position() + n);
                out.mine += n;
                room -= n;
                moved += n;
            }
        }
        if (moved > 0) {
            LONGS.setRelease(out.control, HEAD, out.mine);
        }
        return moved;
    }

    /** Moves into {@code dst} as many bytes as have arrived, up to its remaining; returns how many. */
    int read(ByteBuffer dst) throws IOException {
        long head = (long) LONGS.getAcquire(in.control, HEAD);
        long ready = head - in.mine;
        // The head is the peer's word: behind what was read, or more than a ring ahead, would hand over stale bytes as data.
        if (ready < 0 || ready > RING_BYTES) {
            throw new IOException("the peer's ring count is corrupt (" + head + " bytes written, " + in.mine + " read)");
        }
        int moved = 0;
        while (ready > 0 && dst.hasRemaining()) {
            int at = (int) (in.mine & (RING_BYTES - 1));
            int n = (int) Math.min(Math.min(ready, dst.remaining()), RING_BYTES - at);
            dst.put(dst.position(), in.data, at, n);
            dst.position(dst.position() + n);
            in.mine += n;
            ready -= n;
            moved += n;
        }
        if (moved > 0) {
            LONGS.setRelease(in.control, TAIL, in.mine);
        }
        return moved;
    }

    /**
     * Releases the mapping at once (the memory goes when the peer lets go of it too). The caller
     * guarantees no thread reads or writes the rings any more: touching them after this crashes
     * the process.
     */
    void release() {
        ShmFile.unmap(file);
    }

    // ------------------------------------------------------------------ set-up

    /**
     * Sets up the rings of the quiet, connected {@code ch} between this rank and its peer:
     * {@code opener} is the lower rank (it offers), {@code wanted} whether this side allows
     * shared memory at all. Returns null when the pair stays on TCP (either side refused, or
     * the peer cannot see this host's /dev/shm). Fails only when the connection does (the peer
     * died or fell silent past {@code timeout}).
     */
    static ShmPipe negotiate(SocketChannel ch, boolean opener, boolean wanted, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        try (Selector selector = Selector.open()) {
            ch.configureBlocking(false);
            SelectionKey key = ch.register(selector, 0);
            return opener ? offer(ch, key, wanted, deadline) : answer(ch, key, wanted, deadline);
        } catch (IOException e) {
            throw new CommException("setting up the connection's shared-memory rings failed: " + e.getMessage(), e);
        }
    }

    private static final java.util.concurrent.atomic.AtomicBoolean TOLD_NO_ROOM = new java.util.concurrent.atomic.AtomicBoolean();

    /** Says once per process why its pairs stay on TCP: the run goes on, slower, and the fix is the host's. */
    private static void noRoom(IOException e) {
        if (TOLD_NO_ROOM.compareAndSet(false, true)) {
            System.err.println("fsdp4j: /dev/shm has no room for the shared-memory rings of a connection (" + e.getMessage()
                    + "): the processes of this host talk over TCP instead, which is slower; give /dev/shm more room"
                    + " (docker run --shm-size=1g, or in Kubernetes an emptyDir of medium Memory mounted at /dev/shm)");
        }
    }

    private static ShmPipe offer(SocketChannel ch, SelectionKey key, boolean wanted, long deadline) throws IOException {
        Path path = null;
        MappedByteBuffer map = null;
        long nonce = 0;
        if (wanted && ShmFile.available()) {
            try {
                ShmFile.Created made = ShmFile.create(".rings", 2L * RING_SPAN);
                path = made.path();
                map = made.map();
                nonce = ShmFile.nonce();
                map.putLong(NONCE, nonce);
            } catch (IOException e) {
                noRoom(e);
                path = null;                                // create() deleted what it made
                map = null;
                nonce = 0;
            }
        }
        try {
            byte[] name = path == null ? new byte[0] : path.toString().getBytes(StandardCharsets.UTF_8);
            ByteBuffer msg = ByteBuffer.allocate(16 + name.length).putInt(OFFER_MAGIC).putLong(nonce).putInt(name.length)
                    .put(name).flip();
            writeFully(ch, key, msg, deadline);
            ByteBuffer reply = ByteBuffer.allocate(1);
            readFully(ch, key, reply, deadline);
            boolean accepted = reply.get(0) == 1;
            if (accepted && map == null) {
                throw new IOException("the peer accepted rings it was not offered");
            }
            if (!accepted && map != null) {
                ShmFile.unmap(map);                         // refused: nobody will touch it
            }
            return accepted ? new ShmPipe(map, true) : null;
        } finally {
            ShmFile.delete(path);                           // both sides have mapped it, or neither will
        }
    }

    private static ShmPipe answer(SocketChannel ch, SelectionKey key, boolean wanted, long deadline) throws IOException {
        ByteBuffer head = ByteBuffer.allocate(16);
        readFully(ch, key, head, deadline);
        if (head.getInt(0) != OFFER_MAGIC) {
            throw new IOException(String.format("the peer's ring offer starts with 0x%08x, not fsdp4j's", head.getInt(0)));
        }
        long nonce = head.getLong(4);
        int length = head.getInt(12);
        if (length < 0 || length > MAX_PATH_BYTES) {
            throw new IOException("the peer's ring offer names a path of " + length + " bytes");
        }
        ByteBuffer name = ByteBuffer.allocate(length);
        readFully(ch, key, name, deadline);
        MappedByteBuffer map = null;
        if (wanted && length > 0) {
            try {
                map = ShmFile.openIfOffered(Path.of(new String(name.array(), StandardCharsets.UTF_8)), 2L * RING_SPAN,
                        NONCE, nonce);                      // null: not the same /dev/shm, stay on TCP
            } catch (RuntimeException e) {
                map = null;                                 // not a path at all
            }
        }
        writeFully(ch, key, ByteBuffer.wrap(new byte[] {(byte) (map == null ? 0 : 1)}), deadline);
        return map == null ? null : new ShmPipe(map, false);
    }

    private static void writeFully(SocketChannel ch, SelectionKey key, ByteBuffer b, long deadline) throws IOException {
        while (b.hasRemaining()) {
            if (ch.write(b) == 0) {
                await(key, SelectionKey.OP_WRITE, deadline);
            }
        }
    }

    private static void readFully(SocketChannel ch, SelectionKey key, ByteBuffer b, long deadline) throws IOException {
        while (b.hasRemaining()) {
            int n = ch.read(b);
            if (n < 0) {
                throw new IOException("the peer closed the connection");
            }
            if (n == 0) {
                await(key, SelectionKey.OP_READ, deadline);
            }
        }
    }

    private static void await(SelectionKey key, int ops, long deadline) throws IOException {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            throw new IOException("the peer did not answer in time");
        }
        key.interestOps(ops);
        key.selector().select(Math.max(1, left / 1_000_000));
        key.selector().selectedKeys().clear();
    }
}
