// Reuse of freed host blocks, keyed by exact size. A training step frees and re-allocates the
// same activation and gradient buffers every step; glibc hands large blocks back to the kernel
// on free, so each step's fresh malloc page-faulted every page again on first touch (measured:
// about a quarter of a bench-4x256 CPU step). Kept blocks are reused as they are (malloc's
// contract: uninitialised). The memory tracker counts tensors, so a cached block counts as
// freed; the cache is bounded by MAX_CACHED_BYTES and emptied when a block would overflow it.
package org.fsdp4j.backend.cpu;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.javacpp.Pointer;

final class HostBlockCache {

    /** glibc's initial mmap threshold: smaller blocks come from malloc's own heap, which reuses them. */
    static final long MIN_CACHED_BYTES = 128 << 10;
    /** The most freed bytes the process keeps for reuse (all in-process ranks together). */
    static final long MAX_CACHED_BYTES = 1L << 30;

    private static final Map<Long, ArrayDeque<Pointer>> FREE = new HashMap<>();   // numBytes → blocks
    private static long cachedBytes;

    private HostBlockCache() {
    }

    /** A block of {@code numBytes} (at least 1) of uninitialised memory; null when malloc fails even with the cache emptied. */
    static synchronized Pointer take(long numBytes) {
        ArrayDeque<Pointer> blocks = FREE.get(numBytes);
        if (blocks != null && !blocks.isEmpty()) {
            cachedBytes -= numBytes;
            return blocks.pop();
        }
        Pointer block = Pointer.malloc(Math.max(1, numBytes));   // malloc(0) may return null
        if ((block == null || block.isNull()) && cachedBytes > 0) {
            clear();                                           // the cache's blocks may be what is missing
            block = Pointer.malloc(Math.max(1, numBytes));
        }
        return block;
    }

    /** Returns a block that {@link #take} gave out for {@code numBytes}. */
    static synchronized void give(Pointer block, long numBytes) {
        if (numBytes < MIN_CACHED_BYTES || numBytes > MAX_CACHED_BYTES) {
            Pointer.free(block);
            return;
        }
        if (cachedBytes + numBytes > MAX_CACHED_BYTES) {
            clear();
        }
        FREE.computeIfAbsent(numBytes, n -> new ArrayDeque<>()).push(block);
        cachedBytes += numBytes;
    }

    private static void clear() {
        for (ArrayDeque<Pointer> blocks : FREE.values()) {
            for (Pointer p : blocks) {
                Pointer.free(p);
            }
        }
        FREE.clear();
        cachedBytes = 0;
    }
}
