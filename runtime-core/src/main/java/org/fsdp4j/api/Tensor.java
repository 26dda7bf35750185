// A dense, contiguous, row-major block of elements with a shape and a dtype, living in a
// Storage at an element offset. Views share the storage (that is how a unit's parameters
// map into its flat buffer); only the tensor that allocated the storage may close it.
package org.fsdp4j.api;

import java.util.Arrays;
import org.fsdp4j.api.Storage;

/**
 * A dense, contiguous, row-major block of elements with a shape and a {@link DType}, living in a
 * backend's {@code Storage} (host memory for the CPU, device memory for CUDA) at an element
 * offset. Shapes are written as in PyTorch, e.g. activations (B, T, C) = [batch, sequence,
 * channels]; a tensor of rank 0 is a scalar of one element. Element values are read and written
 * only through {@link Ops}, never directly.
 *
 * <p><b>Ownership.</b> A tensor made by {@link Ops#allocate} (or {@link Ops#zeros}) owns its
 * storage: whoever allocated it closes it, exactly once (a second close does nothing). Views
 * ({@link #view}, {@link #reshape}, {@link #reinterpret}, {@link #slice0}) share the owner's
 * storage, never own it and must not be closed; they stay usable only while the owner is open.
 * The tensors the runtime hands a model ({@link Inputs}, a {@link Unit}'s parameters and
 * gradients, the loss) are the runtime's: a model reads and writes them but never closes them.
 * Memory is stream-ordered: an owner may be closed as soon as the last operation reading it has
 * been called, even if that work has not run yet.
 *
 * <p><b>Threads.</b> The shape, dtype and offset are immutable, so the metadata methods may be
 * called from any thread; issuing work on a tensor belongs to the thread of the rank that owns
 * its backend.
 */
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

    /**
     * A tensor that owns {@code storage}, starting at its first byte; closing it frees the
     * storage. For backends (their {@code allocate}); a model gets its tensors from
     * {@link Ops#allocate}.
     *
     * @param storage a storage no other tensor owns
     * @param dtype   the element type
     * @param shape   the shape; {@code numelOf(shape) * dtype.byteSize()} must fit in the storage
     * @return the owning tensor
     * @throws IllegalArgumentException if the shape has a negative dimension or does not fit
     */
    public static Tensor owning(Storage storage, DType dtype, long... shape) {
        return new Tensor(storage, 0, dtype, shape, true);
    }

    /**
     * Elements of a tensor of this shape.
     *
     * @param shape the dimensions; none for a scalar
     * @return their product (1 for no dimensions)
     * @throws IllegalArgumentException if a dimension is negative
     * @throws ArithmeticException      if the product overflows a long
     */
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
     * A view of {@code numelOf(newShape)} consecutive elements starting {@code elementOffset}
     * elements into this tensor, with this dtype; it shares the storage and must not be closed.
     * Taking a view never fails for a closed tensor (a backend running issued work takes views of
     * tensors the host may have closed since); using one does, when work is issued.
     *
     * @param elementOffset the first element, counted from this tensor's first
     * @param newShape      the view's shape
     * @return the view
     * @throws IllegalArgumentException if the view reaches outside this tensor's elements
     */
    public Tensor view(long elementOffset, long... newShape) {
        long n = numelOf(newShape);
        if (elementOffset < 0 || elementOffset + n > numel) {
            throw new IllegalArgumentException("view [" + elementOffset + ", " + (elementOffset + n)
                    + ") is outside a tensor of " + numel + " elements " + Arrays.toString(shape));
        }
        return new Tensor(storage, offset + elementOffset, dtype, newShape, false);
    }

    /**
     * The same elements with another shape, e.g. (B, T, C) as (B·T, C); a view, not a copy.
     *
     * @param newShape a shape with the same number of elements
     * @return the view
     * @throws IllegalArgumentException if the element counts differ
     */
    public Tensor reshape(long... newShape) {
        if (numelOf(newShape) != numel) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " to "
                    + Arrays.toString(newShape));
        }
        return view(0, newShape);
    }

    /**
     * The same bytes seen as another dtype of equal byte size (e.g. bf16 as f16 for byte moves);
     * a view with this shape, the bits unchanged.
     *
     * @param other a dtype with this dtype's byte size
     * @return the view
     * @throws IllegalArgumentException if the byte sizes differ
     */
    public Tensor reinterpret(DType other) {
        if (other.byteSize() != dtype.byteSize()) {
            throw new IllegalArgumentException("cannot reinterpret " + dtype + " as " + other);
        }
        return new Tensor(storage, offset, other, shape, false);
    }

    /**
     * Row {@code i} of dimension 0, as a view of the remaining dimensions: sample {@code i} of
     * (B, T, C) is a (T, C) tensor.
     *
     * @param i the row, {@code 0 <= i < dim(0)}
     * @return the view
     * @throws IllegalArgumentException if the row is outside the tensor
     */
    public Tensor slice0(long i) {
        long[] rest = Arrays.copyOfRange(shape, 1, shape.length);
        return view(i * numelOf(rest), rest);
    }

    /**
     * The storage the elements live in, for backends.
     *
     * @return the storage (shared with every view of it)
     * @throws IllegalStateException if the storage has been closed
     */
    public Storage storage() {
        storage.checkOpen();
        return storage;
    }

    /**
     * The storage without the closed check, for a backend running work that was issued while the
     * tensor was open: memory is stream-ordered, so its bytes stay valid until that work is done
     * even if the host has closed the tensor since. Everything else uses {@link #storage()}.
     *
     * @return the storage, open or closed
     */
    public Storage rawStorage() {
        return storage;
    }

    /**
     * Where the elements live.
     *
     * @return the storage's device
     */
    public Device device() {
        return storage.device();
    }

    /**
     * The element type.
     *
     * @return the dtype
     */
    public DType dtype() {
        return dtype;
    }

    /**
     * Where the first element sits in the storage.
     *
     * @return the offset in elements of this dtype (0 for an owner)
     */
    public long offset() {
        return offset;
    }

    /**
     * Where the first element sits in the storage, in bytes.
     *
     * @return {@code offset() * dtype().byteSize()}
     */
    public long byteOffset() {
        return offset * dtype.byteSize();
    }

    /**
     * Elements in the tensor.
     *
     * @return the product of the dimensions (1 for a scalar)
     */
    public long numel() {
        return numel;
    }

    /**
     * Bytes the elements take.
     *
     * @return {@code numel() * dtype().byteSize()}
     */
    public long numBytes() {
        return numel * dtype.byteSize();
    }

    /**
     * The number of dimensions (not a distributed rank).
     *
     * @return 0 for a scalar, 3 for (B, T, C)
     */
    public int rank() {
        return shape.length;
    }

    /**
     * One dimension's size; negative indices count from the end, as in PyTorch.
     *
     * @param i {@code 0 <= i < rank()}, or {@code -rank() <= i < 0} ({@code dim(-1)} is the last)
     * @return the size of dimension {@code i}
     * @throws ArrayIndexOutOfBoundsException if {@code i} is outside those ranges
     */
    public long dim(int i) {
        return shape[i < 0 ? shape.length + i : i];
    }

    /**
     * The dimensions, outermost first.
     *
     * @return a copy of the shape
     */
    public long[] shape() {
        return shape.clone();
    }

    /**
     * Whether this tensor owns its storage (and so may be closed), rather than being a view.
     *
     * @return true for a tensor from {@link Ops#allocate} or {@link #owning}
     */
    public boolean isOwner() {
        return owner;
    }

    /**
     * Whether the storage has been closed (by its owner; a view reports its owner's state).
     *
     * @return true once the storage is freed
     */
    public boolean isClosed() {
        return storage.isClosed();
    }

    /**
     * Frees the storage and reports it to the backend's {@link MemoryTracker}; idempotent. Only
     * the owner may close: memory is stream-ordered, so it may be called as soon as the last
     * operation reading the tensor has been issued.
     *
     * @throws IllegalStateException if this tensor is a view (close the tensor that owns the storage)
     */
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
