// Host memory for the CPU backend: one malloc'd block outside the Java heap, so OpenBLAS can
// address it, the memory tracker sees every byte, and it is given back exactly when its tensor
// is closed (never by the garbage collector: Pointer.malloc bypasses JavaCPP's GC accounting),
// to the backend's CpuAllocator, in stream order: the stream it was allocated for, and any
// stream named with recordStream, may still have work queued that uses it.
// Java code reads and writes it through native-order NIO views with absolute get/put; those
// views index with ints, hence the 2^31-1 byte limit per storage.
// A shared storage (allocateShared: a buffer the in-process ranks of one group all read in
// place) comes straight from the host blocks, outside every rank's allocator, and goes back
// there when it is closed: its owner closes it only once every rank's streams are done with it.
// A mapped storage (overMapping: a buffer that processes of one host map, for a group whose
// ranks span them) is the same, its memory a mapping that its owner gives back instead.
package org.fsdp4j.backend.cpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.api.Storage;

public final class CpuStorage extends Storage {

    /** The largest storage the NIO views can index. */
    public static final long MAX_BYTES = Integer.MAX_VALUE;

    private final Pointer block;        // what the allocator handed out
    private final BytePointer pointer;
    private final CpuAllocator allocator;   // null for a shared or mapped storage
    private final Runnable giveBack;        // a shared or mapped storage's release; null otherwise
    private final Object mapping;           // a mapped storage's buffer, held so the collector leaves it mapped
    private final CpuStream stream;     // the stream it was allocated for (null: shared)
    private final Set<CpuStream> users = new LinkedHashSet<>();   // other streams named with recordStream
    private final ByteBuffer bytes;     // the whole block, native byte order
    private final FloatBuffer floats;   // element e of an F32 tensor at element offset o: floats.get(o + e)
    private final ShortBuffer shorts;   // F16 / BF16 bits, indexed the same way
    private final IntBuffer ints;       // I32

    private CpuStorage(Pointer block, long numBytes, MemoryCategory category, List<MemoryTracker> charged, int parts,
                       CpuAllocator allocator, Runnable giveBack, Object mapping, CpuStream stream) {
        super(Device.CPU, numBytes, category, charged, parts);
        this.block = block;
        this.pointer = new BytePointer(block).capacity(Math.max(1, numBytes));
        this.allocator = allocator;
        this.giveBack = giveBack;
        this.mapping = mapping;
        this.stream = stream;
        this.bytes = pointer.asByteBuffer().order(ByteOrder.nativeOrder());
        this.floats = bytes.asFloatBuffer();
        this.shorts = bytes.asShortBuffer();
        this.ints = bytes.asIntBuffer();
    }

    /** Allocates {@code numBytes} of uninitialised host memory for work on {@code stream} and reports it to {@code tracker}. */
    static CpuStorage allocate(long numBytes, MemoryCategory category, MemoryTracker tracker, CpuAllocator allocator,
                               CpuStream stream) {
        checkSize(numBytes, category);
        boolean inWork = CpuStream.inStreamWork();
        Pointer raw = allocator.allocate(numBytes, stream, inWork);
        if (raw == null) {
            throw new OutOfMemoryError("malloc of " + numBytes + " bytes of host memory for "
                    + category.label() + " failed (" + tracker + ")");
        }
        try {
            return new CpuStorage(raw, numBytes, category, List.of(tracker), 1, allocator, null, null, stream);
        } catch (RuntimeException | Error e) {
            allocator.free(raw, numBytes, stream, List.of(), inWork);
            throw e;
        }
    }

    /**
     * {@code numBytes} of uninitialised host memory that several in-process ranks share, charged
     * in equal parts to {@code charged} (one tracker per rank) and given back to {@code blocks}
     * when closed; poisoned first when {@code poison} (the debug mode).
     */
    static CpuStorage allocateShared(long numBytes, MemoryCategory category, List<MemoryTracker> charged,
                                     HostBlocks blocks, boolean poison) {
        checkSize(numBytes, category);
        Pointer raw = blocks.allocate(numBytes);
        if (raw == null || raw.isNull()) {
            throw new OutOfMemoryError("malloc of " + numBytes + " bytes of shared host memory for "
                    + category.label() + " failed (" + charged + ")");
        }
        if (poison) {
            Pointer.memset(raw, 0xFF, Math.max(1, numBytes));
        }
        try {
            return new CpuStorage(raw, numBytes, category, charged, charged.size(), null, () -> blocks.free(raw), null,
                    null);
        } catch (RuntimeException | Error e) {
            blocks.free(raw);
            throw e;
        }
    }

    /**
     * A tensor of {@code shape} over the first bytes of {@code mapping} (a direct buffer, e.g. a
     * file that several processes map), charged as 1/{@code parts} of it to each of
     * {@code charged}; closing it runs {@code release} (which unmaps it), once nothing reads it.
     * Like a shared storage, it is not stream-ordered: its owner closes it once every stream of
     * every rank holding it is done with it.
     */
    public static Tensor overMapping(ByteBuffer mapping, Runnable release, DType dtype, MemoryCategory category,
                                     List<MemoryTracker> charged, int parts, long... shape) {
        long numBytes = Math.multiplyExact(Tensor.numelOf(shape), dtype.byteSize());
        checkSize(numBytes, category);
        if (!mapping.isDirect() || mapping.capacity() < numBytes) {
            throw new IllegalArgumentException("a mapped tensor of " + numBytes + " bytes needs a direct buffer of at least"
                    + " as many, not " + mapping);
        }
        Pointer raw = new Pointer(mapping.duplicate().clear());
        return Tensor.owning(new CpuStorage(raw, numBytes, category, charged, parts, null, release, mapping, null), dtype,
                shape);
    }

    private static void checkSize(long numBytes, MemoryCategory category) {
        if (numBytes < 0) {
            throw new IllegalArgumentException("negative allocation of " + numBytes + " bytes");
        }
        if (numBytes > MAX_BYTES) {
            throw new IllegalArgumentException("a CPU tensor holds at most " + MAX_BYTES + " bytes (Java buffers are"
                    + " int-indexed), but " + numBytes + " bytes of " + category.label() + " were requested; "
                    + (category == MemoryCategory.ACTIVATIONS
                            ? "lower --batch-size or --seq-len, or raise --micro-batches, so that one micro-batch fits"
                            : "split it (e.g. shard over more ranks, or smaller units) or use the CUDA backend"));
        }
    }

    /**
     * The CPU storage behind {@code t}, for work that runs on a stream: the host may have closed
     * the tensor since it issued the work (a stream-ordered free), and the bytes stay valid until
     * the work is done. Issuing checks that the tensor is open (see checkIssue).
     */
    static CpuStorage of(Tensor t) {
        if (!(t.rawStorage() instanceof CpuStorage s)) {
            throw new IllegalArgumentException(t + " is not a CPU tensor; copy it to the host first");
        }
        return s;
    }

    /**
     * The host address of {@code t}'s first byte, for another backend's native copy to or from it
     * (a GPU's DMA under offload); t must be an open CPU tensor.
     */
    public static long hostAddress(Tensor t) {
        checkIssue("hostAddress", t);
        return of(t).pointer.address() + t.byteOffset();
    }

    /** What an op checks when it is issued: the tensor is a CPU tensor and not closed. */
    static void checkIssue(String op, Tensor t) {
        if (!(t.storage() instanceof CpuStorage)) {      // storage() throws if closed
            throw new IllegalArgumentException(op + ": " + t + " is not a CPU tensor; copy it to the host first");
        }
    }

    /** Also used by {@code other} (not the stream it was allocated for): see Backend.recordStream. */
    void recordStream(CpuStream other) {
        checkOpen();
        if (allocator != null && other != stream) {
            synchronized (users) {
                users.add(other);
            }
        }
    }

    /**
     * A native-order view of exactly {@code t}'s bytes (position 0, capacity = t.numBytes()).
     * Valid until the tensor's storage is closed; reading it afterwards reads freed memory.
     */
    public static ByteBuffer byteView(Tensor t) {
        checkIssue("byteView", t);
        CpuStorage s = of(t);
        return s.bytes.slice(Math.toIntExact(t.byteOffset()), Math.toIntExact(t.numBytes()))
                .order(ByteOrder.nativeOrder());
    }

    /** A view of an F32 tensor's elements (index 0 = its first element); same validity as byteView. */
    public static FloatBuffer floatView(Tensor t) {
        if (t.dtype() != DType.F32) {
            throw new IllegalArgumentException("floatView needs an F32 tensor, got " + t);
        }
        return byteView(t).asFloatBuffer();
    }

    /** The whole block as a native-order buffer (absolute indexing only: the view is shared). */
    ByteBuffer bytes() {
        return bytes;
    }

    FloatBuffer floats() {
        return floats;
    }

    ShortBuffer shorts() {
        return shorts;
    }

    IntBuffer ints() {
        return ints;
    }

    /** The base of the block, for native calls (OpenBLAS). */
    BytePointer pointer() {
        return pointer;
    }

    @Override
    protected void release() {
        if (allocator == null) {
            giveBack.run();             // its owner closes it once no rank's stream uses it
            return;
        }
        List<CpuEvent> pendingUsers = new ArrayList<>();
        synchronized (users) {
            for (CpuStream u : users) {
                if (!u.isClosed()) {
                    pendingUsers.add(u.record());
                }
            }
        }
        allocator.free(block, numBytes(), stream, pendingUsers, CpuStream.inStreamWork());
    }
}
