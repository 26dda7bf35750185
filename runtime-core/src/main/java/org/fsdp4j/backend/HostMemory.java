// How much host memory a run may still take: the kernel's MemAvailable (free memory plus what
// it can reclaim, e.g. the page cache), capped by a container's limit when the JVM sees one.
// CPU tensors are malloc'd outside the Java heap, so the heap size is not the limit.
package org.fsdp4j.backend;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;

public final class HostMemory {

    private static final Path MEMINFO = Path.of("/proc/meminfo");

    private HostMemory() {
    }

    /** Bytes the process can still allocate, as far as the OS says; empty where it cannot tell. */
    public static OptionalLong availableBytes() {
        OptionalLong memAvailable = meminfo("MemAvailable:");
        OptionalLong memTotal = meminfo("MemTotal:");
        if (!(ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os)) {
            return memAvailable;
        }
        // container-aware (JDK 14+): the cgroup's limit and what is left of it when one is set
        long total = os.getTotalMemorySize();
        long free = os.getFreeMemorySize();
        if (memAvailable.isEmpty()) {
            return free > 0 ? OptionalLong.of(free) : OptionalLong.empty();
        }
        boolean limitedByContainer = memTotal.isPresent() && total > 0 && total < memTotal.getAsLong();
        return limitedByContainer ? OptionalLong.of(Math.min(memAvailable.getAsLong(), free)) : memAvailable;
    }

    /** A "Key:   123 kB" line of /proc/meminfo, in bytes. */
    private static OptionalLong meminfo(String key) {
        try {
            for (String line : Files.readAllLines(MEMINFO)) {
                if (line.startsWith(key)) {
                    String[] f = line.substring(key.length()).trim().split("\\s+");
                    long v = Long.parseLong(f[0]);
                    return OptionalLong.of(f.length > 1 && f[1].equalsIgnoreCase("kB") ? v * 1024 : v);
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or an unexpected format: fall back to the JVM's view
        }
        return OptionalLong.empty();
    }
}
