// A dense, contiguous, row-major block of elements with a shape and a dtype, living in a
// Storage at an element offset. Views share the storage (that is how a unit's parameters
// map into its flat buffer); only the tensor that allocated the storage may close it.
package org.fsdp4j.api;

import java.util.Arrays;
import org.fsdp4j.backend.Storage;

public final class Tensor implements AutoCloseable {

    private final Storage storage;
    private final long offset;      // in elements of dtype, from the start of the storage
    private final long[] shape;
    private final long numel;
    private final DType dtype;
    private final boolean owner;

    private Tensor(Storage storage, long offset, DType dtype, long[] shape, boolean owner) {
        this.storage = storage;
        this.offset = offset;
        this.dtype = dtype;
        this.shape = shape.clone();
        this.numel = numelOf(this.shape);
        this.owner = owner;
        if (offset < 0 || (offset + numel) * dtype.byteSize() > storage.numBytes()) {
            throw new IllegalArgumentException("view [" + offset + ", " + (offset + numel) + ") of " + dtype
                    + " does not fit in a storage of " + storage.numBytes() + " bytes");
        }
    }

    /** A tensor that owns {@code storage}; closing it frees the storage. */
    public static Tensor owning(Storage storage, DType dtype, long... shape) {
        return new Tensor(storage, 0, dtype, shape, true);
    }

    public static long numelOf(long... shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dim in shape " + Arrays.toString(shape));
            }
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    /**
     * Checks a tensor's shape.
     *
     * @param t     the tensor
     * @param what  names it in the message ("Linear weight")
     * @param shape the shape it must have
     * @throws IllegalArgumentException naming {@code what}, the expected and the actual shape, if they differ
     */
    public static void requireShape(Tensor t, String what, long... shape) {
        if (!Arrays.equals(t.shape, shape)) {
            throw new IllegalArgumentException(what + " must have shape " + Arrays.toString(shape) + ", got "
                    + Arrays.toString(t.shape));
        }
    }

    /**
     * A view of {@code numelOf(shape)} elements starting {@code elementOffset} elements into this
     * tensor. Taking a view never fails for a closed tensor (a backend running issued work takes
     * views of tensors the host may have closed since); using one does, when work is issued.
     */
    public Tensor view(long elementOffset, long... newShape) {
        long n = numelOf(newShape);
        if (elementOffset < 0 || elementOffset + n > numel) {
            throw new IllegalArgumentException("view [" + elementOffset + ", " + (elementOffset + n)
                    + ") is outside a tensor of " + numel + " elements " + Arrays.toString(shape));
        }
        return new Tensor(storage, offset + elementOffset, dtype, newShape, false);
    }

    /** The same elements with another shape of equal numel. */
    public Tensor reshape(long... newShape) {
        if (numelOf(newShape) != numel) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " to "
                    + Arrays.toString(newShape));
        }
        return view(0, newShape);
    }

    /** The same bytes seen as another dtype of equal byte size (e.g. bf16 as f16 for byte moves). */
    public Tensor reinterpret(DType other) {
        if (other.byteSize() != dtype.byteSize()) {
            throw new IllegalArgumentException("cannot reinterpret " + dtype + " as " + other);
        }
        return new Tensor(storage, offset, other, shape, false);
    }

    /** Row {@code i} of the first dim, as a tensor of the remaining dims. */
    public Tensor slice0(long i) {
        long[] rest = Arrays.copyOfRange(shape, 1, shape.length);
        return view(i * numelOf(rest), rest);
    }

    public Storage storage() {
        storage.checkOpen();
        return storage;
    }

    /**
     * The storage without the closed check, for a backend running work that was issued while the
     * tensor was open: memory is stream-ordered, so its bytes stay valid until that work is done
     * even if the host has closed the tensor since. Everything else uses storage().
     */
    public Storage rawStorage() {
        return storage;
    }

    public Device device() {
        return storage.device();
    }

    public DType dtype() {
        return dtype;
    }

    /** Offset of the first element in elements, from the start of the storage. */
    public long offset() {
        return offset;
    }

    public long byteOffset() {
        return offset * dtype.byteSize();
    }

    public long numel() {
        return numel;
    }

    public long numBytes() {
        return numel * dtype.byteSize();
    }

    public int rank() {
        return shape.length;
    }

    public long dim(int i) {
        return shape[i < 0 ? shape.length + i : i];
    }

    public long[] shape() {
        return shape.clone();
    }

    public boolean isOwner() {
        return owner;
    }

    public boolean isClosed() {
        return storage.isClosed();
    }

    /** Frees the storage if this tensor owns it (idempotent); closing a view is a bug and throws. */
    @Override
    public void close() {
        if (!owner) {
            throw new IllegalStateException("close() on a view " + this + ": close the tensor that owns the storage");
        }
        storage.close();
    }

    @Override
    public String toString() {
        return "Tensor(" + dtype.shortName() + Arrays.toString(shape) + " @" + offset + " on " + storage.device()
                + ", " + storage.category().label() + ")";
    }
}
