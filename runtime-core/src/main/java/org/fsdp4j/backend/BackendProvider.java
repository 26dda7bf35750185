// What ServiceLoader finds: one provider per kind of device. Providers must be cheap to
// construct and must not touch native libraries until available() or create() is called.
package org.fsdp4j.backend;

import java.util.Optional;
import java.util.OptionalLong;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;

public interface BackendProvider {

    /** The device kind this provider serves. */
    Device.Kind kind();

    /** Empty when usable; otherwise why not (no driver, no device, which library is missing). Probes once. */
    Optional<String> unavailableReason();

    /** Number of devices of this kind (1 for the CPU). */
    int deviceCount();

    /** A backend for {@code device} reporting to {@code tracker}, built as {@code options} say. */
    Backend create(Device device, MemoryTracker tracker, BackendOptions options);

    /**
     * The CPU backend that holds what a rank on {@code device} offloads (master shard,
     * gradient shard, optimizer state): ordinary host memory for the CPU, page-locked memory the
     * GPU's copy engines reach directly for CUDA.
     */
    Backend createHost(Device device, MemoryTracker tracker, BackendOptions options);

    /**
     * Bytes a run may still allocate on {@code device} (free GPU memory; available host RAM for
     * the CPU), for the preflight; empty where the provider cannot tell.
     */
    default OptionalLong availableMemoryBytes(Device device) {
        return OptionalLong.empty();
    }

    /**
     * Bytes each rank's backend on {@code device} keeps for itself beside the tensors a step
     * allocates (the CUDA backend's cuBLAS workspace), which the preflight adds to every rank's
     * peak; 0 by default.
     */
    default long reservedBytesPerRank(Device device) {
        return 0;
    }
}
