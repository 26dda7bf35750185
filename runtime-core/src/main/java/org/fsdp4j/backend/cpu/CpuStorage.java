// Host memory for the CPU backend: one malloc'd block outside the Java heap, so OpenBLAS can
// address it, the memory tracker sees every byte, and it is released exactly when its tensor is
// closed (never by the garbage collector: Pointer.malloc bypasses JavaCPP's GC accounting), to
// HostBlockCache, which keeps large blocks for the next allocation of the same size.
// Java code reads and writes it through native-order NIO views with absolute get/put; those
// views index with ints, hence the 2^31-1 byte limit per storage.
package org.fsdp4j.backend.cpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.fsdp4j.tensor.DType;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.tensor.MemoryCategory;
import org.fsdp4j.tensor.MemoryTracker;
import org.fsdp4j.tensor.Storage;
import org.fsdp4j.tensor.Tensor;

public final class CpuStorage extends Storage {

    /** The largest storage the NIO views can index. */
    public static final long MAX_BYTES = Integer.MAX_VALUE;

    private final BytePointer pointer;
    private final ByteBuffer bytes;     // the whole block, native byte order
    private final FloatBuffer floats;   // element e of an F32 tensor at element offset o: floats.get(o + e)
    private final ShortBuffer shorts;   // F16 / BF16 bits, indexed the same way
    private final IntBuffer ints;       // I32

    private CpuStorage(BytePointer pointer, long numBytes, MemoryCategory category, MemoryTracker tracker) {
        super(Device.CPU, numBytes, category, tracker);
        this.pointer = pointer;
        this.bytes = pointer.asByteBuffer().order(ByteOrder.nativeOrder());
        this.floats = bytes.asFloatBuffer();
        this.shorts = bytes.asShortBuffer();
        this.ints = bytes.asIntBuffer();
    }

    /** Allocates {@code numBytes} of uninitialised host memory and reports it to {@code tracker}. */
    public static CpuStorage allocate(long numBytes, MemoryCategory category, MemoryTracker tracker) {
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
        Pointer raw = HostBlockCache.take(numBytes);
        if (raw == null || raw.isNull()) {
            throw new OutOfMemoryError("malloc of " + numBytes + " bytes of host memory for "
                    + category.label() + " failed (" + tracker + ")");
        }
        BytePointer pointer = new BytePointer(raw).capacity(Math.max(1, numBytes));
        try {
            return new CpuStorage(pointer, numBytes, category, tracker);
        } catch (RuntimeException | Error e) {
            HostBlockCache.give(raw, numBytes);
            throw e;
        }
    }

    /** The CPU storage behind {@code t}; a clear error if the tensor lives elsewhere or was closed. */
    public static CpuStorage of(Tensor t) {
        if (!(t.storage() instanceof CpuStorage)) {      // storage() throws if closed
            throw new IllegalArgumentException(t + " is not a CPU tensor; copy it to the host first");
        }
        return (CpuStorage) t.storage();
    }

    /**
     * A native-order view of exactly {@code t}'s bytes (position 0, capacity = t.numBytes()).
     * Valid until the tensor's storage is closed; reading it afterwards reads freed memory.
     */
    public static ByteBuffer byteView(Tensor t) {
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
    public ByteBuffer bytes() {
        checkOpen();
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
        checkOpen();
        return pointer;
    }

    @Override
    protected void release() {
        HostBlockCache.give(pointer, numBytes());
    }
}
