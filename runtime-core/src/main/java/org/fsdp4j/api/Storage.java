// One native allocation (host memory for the CPU backend, device memory for CUDA), owned by
// exactly one Tensor. Closing it returns the bytes to its backend and to the memory tracker;
// close is idempotent and any later use fails loudly. A storage that several ranks share
// (Backend.allocateShared; a buffer mapped by several processes) is charged in equal parts to
// each rank's tracker, the parts of ranks in other processes being charged there.
package org.fsdp4j.api;

import java.util.List;

/**
 * The memory a {@link Tensor} views: one allocation of a backend, charged to the ranks' memory
 * trackers while it is open. Backends subclass it; a model never needs to.
 */
public abstract class Storage implements AutoCloseable {

    private final Device device;
    private final long numBytes;
    private final MemoryCategory category;
    private final List<MemoryTracker> charged;
    private final long share;           // bytes charged to each of charged
    private volatile boolean closed;

    /**
     * Charges all {@code numBytes} to {@code tracker}.
     *
     * @param device   where the memory is
     * @param numBytes its size
     * @param category what it holds, for the tracker
     * @param tracker  the rank's tracker
     */
    protected Storage(Device device, long numBytes, MemoryCategory category, MemoryTracker tracker) {
        this(device, numBytes, category, List.of(tracker));
    }

    /**
     * Charges numBytes / charged.size() to each of {@code charged} (which must divide numBytes).
     *
     * @param device   where the memory is
     * @param numBytes its size
     * @param category what it holds, for the trackers
     * @param charged  the trackers of the ranks that share it
     */
    protected Storage(Device device, long numBytes, MemoryCategory category, List<MemoryTracker> charged) {
        this(device, numBytes, category, charged, charged.size());
    }

    /**
     * Charges numBytes / {@code parts} to each of {@code charged}: the storage is split in
     * {@code parts} equal parts (which must divide numBytes), of which these trackers hold
     * charged.size(); the others are charged in other processes.
     *
     * @param device   where the memory is
     * @param numBytes its size
     * @param category what it holds, for the trackers
     * @param charged  the trackers of this process's ranks that share it
     * @param parts    the ranks that share it, in every process
     */
    protected Storage(Device device, long numBytes, MemoryCategory category, List<MemoryTracker> charged, int parts) {
        if (charged.isEmpty() || parts < charged.size() || numBytes % parts != 0) {
            throw new IllegalArgumentException(numBytes + " bytes of " + category.label() + " cannot be charged in "
                    + parts + " equal parts to " + charged.size() + " trackers");
        }
        this.device = device;
        this.numBytes = numBytes;
        this.category = category;
        this.charged = List.copyOf(charged);
        this.share = numBytes / parts;
        for (MemoryTracker t : this.charged) {
            t.allocated(category, share);
        }
    }

    /** @return where the memory is */
    public final Device device() {
        return device;
    }

    /** @return the allocation's size in bytes */
    public final long numBytes() {
        return numBytes;
    }

    /** @return what the memory holds, as the trackers count it */
    public final MemoryCategory category() {
        return category;
    }

    /** @return whether {@link #close} was called */
    public final boolean isClosed() {
        return closed;
    }

    /** Throws if this storage was closed; backends call it before touching the memory. */
    public final void checkOpen() {
        if (closed) {
            throw new IllegalStateException("use of a closed " + category.label() + " buffer of "
                    + numBytes + " bytes on " + device);
        }
    }

    /** Returns the memory to its backend and uncharges the trackers; idempotent. */
    @Override
    public final void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        release();
        for (MemoryTracker t : charged) {
            t.freed(category, share);
        }
    }

    /** Returns the memory to where it came from (free, or the caching allocator's pool). */
    protected abstract void release();
}
