// Finds backends with ServiceLoader and resolves --device auto|cpu|cuda[:i]. "auto" takes a
// usable CUDA device and otherwise falls back to the CPU, saying why in one log line; a run
// makes that choice once, at its start, and pins it (pin) so that what it starts later sees no
// "auto" to decide again.
package org.fsdp4j.backend;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.function.Consumer;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;

public final class Backends {

    private Backends() {
    }

    /**
     * The usual cause of a native library that will not load: JavaCPP unpacks each one into a cache
     * folder and loads it from there, which fails on a read-only home or a noexec /tmp (containers).
     */
    public static final String NATIVE_CACHE_HINT = "JavaCPP unpacks native libraries into ~/.javacpp/cache"
            + " (java.io.tmpdir when that cannot be made) and loads them from there: give it a writable folder"
            + " that allows executables with FSDP4J_JAVA_OPTS=-Dorg.bytedeco.javacpp.cachedir=DIR";

    public static List<BackendProvider> providers() {
        List<BackendProvider> list = new ArrayList<>();
        ServiceLoader.load(BackendProvider.class).forEach(list::add);
        return list;
    }

    public static Optional<BackendProvider> provider(Device.Kind kind) {
        return providers().stream().filter(p -> p.kind() == kind).findFirst();
    }

    /**
     * Resolves a --device value to a concrete device. {@code log} receives the one line that
     * explains a fallback from auto to cpu. Asking for cuda where none is usable is an error
     * that carries the reason.
     */
    public static Device resolve(String requested, Consumer<String> log) {
        String r = requested.trim().toLowerCase(Locale.ROOT);
        if (r.equals("auto")) {
            Optional<BackendProvider> cuda = provider(Device.Kind.CUDA);
            String noCuda = cuda.isEmpty() ? "this build has no CUDA backend"
                    : cuda.get().unavailableReason().orElse(null);
            if (noCuda == null) {
                return Device.cuda(0);
            }
            Optional<String> noCpu = provider(Device.Kind.CPU).flatMap(BackendProvider::unavailableReason);
            if (noCpu.isPresent()) {
                throw new IllegalArgumentException("device auto: no device is usable: cpu: " + noCpu.get()
                        + "; cuda: " + noCuda);
            }
            log.accept("device auto: using cpu (" + noCuda + ")");
            return Device.CPU;
        }
        Device d = Device.parse(requested);
        BackendProvider p = provider(d.kind()).orElseThrow(() -> new IllegalArgumentException(
                "device " + d + " requested but this build has no " + d.kind().name().toLowerCase(Locale.ROOT)
                        + " backend"));
        Optional<String> why = p.unavailableReason();
        if (why.isPresent()) {
            // the CPU is the fallback: a CPU that cannot run has only the way out its reason names
            throw new IllegalArgumentException("device " + r + " is not usable: " + why.get()
                    + (d.isCpu() ? "" : "; use --device cpu or --device auto"));
        }
        if (d.index() >= p.deviceCount()) {
            throw new IllegalArgumentException("device " + d + " does not exist: " + p.deviceCount()
                    + " device(s) of that kind are visible");
        }
        return d;
    }

    /**
     * The request with "auto" replaced by what it resolved to: "cpu", or "cuda" (every GPU, one rank
     * each, as auto places ranks on GPUs); any other request as it is.
     */
    public static String pin(String requested, Device resolved) {
        if (!requested.trim().equalsIgnoreCase("auto")) {
            return requested;
        }
        return resolved.isCpu() ? "cpu" : "cuda";
    }

    public static Backend create(Device device, MemoryTracker tracker, BackendOptions options) {
        return provider(device.kind()).orElseThrow(() -> new IllegalArgumentException("no backend for " + device))
                .create(device, tracker, options);
    }

    /** The host backend that holds what a rank on {@code device} offloads (see BackendProvider.createHost). */
    public static Backend createHost(Device device, MemoryTracker tracker, BackendOptions options) {
        return provider(device.kind()).orElseThrow(() -> new IllegalArgumentException("no backend for " + device))
                .createHost(device, tracker, options);
    }

    /** {@code cpuThreads} host threads (0 = all cores), debug streams as the system property says. */
    public static Backend create(Device device, MemoryTracker tracker, int cpuThreads) {
        return create(device, tracker, BackendOptions.defaults(cpuThreads));
    }
}
