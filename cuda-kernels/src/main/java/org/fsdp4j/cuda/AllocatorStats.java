// What the caching allocator holds: bytes handed out (and their peak), bytes reserved from
// cudaMalloc (in use plus cached), and how many cudaMalloc calls it made, which stays flat
// once a training loop reaches its steady state.
package org.fsdp4j.cuda;

public record AllocatorStats(long inUseBytes, long peakInUseBytes, long reservedBytes, long cudaMallocCalls) {
}
