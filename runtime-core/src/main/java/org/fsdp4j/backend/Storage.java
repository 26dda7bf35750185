// One native allocation (host memory for the CPU backend, device memory for CUDA), owned by
// exactly one Tensor. Closing it returns the bytes to its backend and to the memory tracker;
// close is idempotent and any later use fails loudly. A storage that several in-process ranks
// share (Backend.allocateShared) is charged in equal parts to each rank's tracker.
package org.fsdp4j.backend;

import java.util.List;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;

public abstract class Storage implements AutoCloseable {

    private final Device device;
    private final long numBytes;
    private final MemoryCategory category;
    private final List<MemoryTracker> charged;
    private volatile boolean closed;

    protected Storage(Device device, long numBytes, MemoryCategory category, MemoryTracker tracker) {
        this(device, numBytes, category, List.of(tracker));
    }

    /** Charges numBytes / charged.size() to each of {@code charged} (which must divide numBytes). */
    protected Storage(Device device, long numBytes, MemoryCategory category, List<MemoryTracker> charged) {
        if (charged.isEmpty() || numBytes % charged.size() != 0) {
            throw new IllegalArgumentException(numBytes + " bytes of " + category.label() + " cannot be charged in equal"
                    + " parts to " + charged.size() + " trackers");
        }
        this.device = device;
        this.numBytes = numBytes;
        this.category = category;
        this.charged = List.copyOf(charged);
        for (MemoryTracker t : this.charged) {
            t.allocated(category, numBytes / this.charged.size());
        }
    }

    public final Device device() {
        return device;
    }

    public final long numBytes() {
        return numBytes;
    }

    public final MemoryCategory category() {
        return category;
    }

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
            t.freed(category, numBytes / charged.size());
        }
    }

    /** Returns the memory to where it came from (free, or the caching allocator's pool). */
    protected abstract void release();
}
