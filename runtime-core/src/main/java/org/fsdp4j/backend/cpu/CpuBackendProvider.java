// ServiceLoader entry for the CPU backend. Construction is free; the OpenBLAS native library
// is loaded by the first unavailableReason() or create(), once.
package org.fsdp4j.backend.cpu;

import java.util.Optional;
import java.util.OptionalLong;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.BackendProvider;
import org.fsdp4j.backend.HostMemory;

public final class CpuBackendProvider implements BackendProvider {

    /** The most threads a CPU backend can have (its ForkJoinPool's limit). */
    public static final int MAX_THREADS = BackendOptions.MAX_CPU_THREADS;

    /** Empty when OpenBLAS loaded; otherwise why not. Probed once per JVM. */
    private static final class Probe {
        static final Optional<String> REASON = probe();

        private static Optional<String> probe() {
            try {
                OpenBlas.load();
                return Optional.empty();
            } catch (LinkageError e) {
                return Optional.of("OpenBLAS could not be loaded (" + e.getMessage() + "); " + org.fsdp4j.backend.Backends.NATIVE_CACHE_HINT);
            }
        }
    }

    @Override
    public Device.Kind kind() {
        return Device.Kind.CPU;
    }

    @Override
    public Optional<String> unavailableReason() {
        return Probe.REASON;
    }

    @Override
    public int deviceCount() {
        return 1;
    }

    @Override
    public Backend create(Device device, MemoryTracker tracker, BackendOptions options) {
        if (!device.isCpu()) {
            throw new IllegalArgumentException("the CPU backend serves device cpu, not " + device);
        }
        Optional<String> why = unavailableReason();
        if (why.isPresent()) {
            throw new IllegalStateException("the CPU backend is not usable: " + why.get());
        }
        int threads = options.cpuThreads() == 0 ? Runtime.getRuntime().availableProcessors() : options.cpuThreads();
        return new CpuBackend(tracker, threads, options.debugStreams());
    }

    @Override
    public Backend createHost(Device device, MemoryTracker tracker, BackendOptions options) {
        return create(Device.CPU, tracker, options);
    }

    /** CPU tensors live in host RAM, off the Java heap. */
    @Override
    public OptionalLong availableMemoryBytes(Device device) {
        return HostMemory.availableBytes();
    }
}
