// Lets ServiceLoader find the CUDA backend. Cheap to construct and touches no native library
// until asked: availability comes from CudaProbe, which loads CUDA once per JVM.
package org.fsdp4j.cuda;

import java.util.Optional;
import java.util.OptionalLong;
import org.bytedeco.javacpp.SizeTPointer;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.BackendProvider;
import org.fsdp4j.backend.cpu.CpuBackend;

public final class CudaBackendProvider implements BackendProvider {

    @Override
    public Device.Kind kind() {
        return Device.Kind.CUDA;
    }

    @Override
    public Optional<String> unavailableReason() {
        return CudaProbe.probe().unavailableReason();
    }

    @Override
    public int deviceCount() {
        return CudaProbe.probe().deviceCount();
    }

    /** The host of a GPU rank's offloaded state: a CPU backend on page-locked memory. */
    @Override
    public Backend createHost(Device device, MemoryTracker tracker, BackendOptions options) {
        int threads = options.cpuThreads() == 0 ? Runtime.getRuntime().availableProcessors() : options.cpuThreads();
        return new CpuBackend(tracker, threads, options.debugStreams(), new PinnedHostBlocks(device.index()));
    }

    /** The options' CPU threads and debug streams do not apply: the GPU does the work, on real streams. */
    @Override
    public Backend create(Device device, MemoryTracker tracker, BackendOptions options) {
        if (device.kind() != Device.Kind.CUDA) {
            throw new IllegalArgumentException("the CUDA provider cannot create a backend for " + device);
        }
        return new CudaBackend(device.index(), tracker, CudaOptions.fromSystemProperties());
    }

    /** The cuBLAS workspace of the compute stream (the one stream whose GEMMs get a handle in a step). */
    @Override
    public long reservedBytesPerRank(Device device) {
        return CudaOptions.fromSystemProperties().cublasWorkspaceBytes();
    }

    /**
     * Free memory on the GPU (cudaMemGetInfo), what other processes hold already subtracted;
     * empty when CUDA is not usable. Creates the device's primary context, as a run would.
     */
    @Override
    public OptionalLong availableMemoryBytes(Device device) {
        if (device.kind() != Device.Kind.CUDA || !CudaProbe.probe().usable()) {
            return OptionalLong.empty();
        }
        int index = device.index();
        CudaCheck.check(org.bytedeco.cuda.global.cudart.cudaSetDevice(index), "cudaSetDevice(" + index + ")", index);
        try (SizeTPointer free = new SizeTPointer(1); SizeTPointer total = new SizeTPointer(1)) {
            CudaCheck.check(org.bytedeco.cuda.global.cudart.cudaMemGetInfo(free, total), "cudaMemGetInfo", index);
            return OptionalLong.of(free.get());
        }
    }
}
