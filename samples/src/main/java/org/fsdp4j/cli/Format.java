// Number formatting for the logs a person reads: bytes in binary units, rates with k/M
// suffixes, learning rates in scientific notation. One place, so every line agrees.
package org.fsdp4j.cli;

import java.util.Locale;

final class Format {

    private Format() {
    }

    /** 1.21 MiB, 3.50 GiB, 512 B. */
    private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB"};

    static String bytes(long numBytes) {
        int u = unitOf(numBytes);
        return u == 0 ? numBytes + " B" : String.format(Locale.ROOT, "%.2f %s", numBytes / Math.pow(1024, u), UNITS[u]);
    }

    /** "18.44 MiB = params 1.70 + grads 2.36 + ...": a total and its non-zero parts, in the total's unit. */
    static String bytesSplit(long total, java.util.Map<org.fsdp4j.tensor.MemoryCategory, Long> parts) {
        int u = unitOf(total);
        StringBuilder b = new StringBuilder(bytes(total));
        String sep = " = ";
        for (var e : parts.entrySet()) {
            if (e.getValue() > 0) {
                b.append(sep).append(e.getKey().label()).append(' ').append(u == 0 ? String.valueOf(e.getValue())
                        : String.format(Locale.ROOT, "%.2f", e.getValue() / Math.pow(1024, u)));
                sep = " + ";
            }
        }
        return b.toString();
    }

    /** Index into UNITS for a byte count: the largest unit that leaves a value of at least 1. */
    private static int unitOf(long numBytes) {
        int u = 0;
        double v = numBytes;
        while (v >= 1024 && u < UNITS.length - 1) {
            v /= 1024;
            u++;
        }
        return u;
    }

    /** 950, 12.3k, 4.56M. */
    static String count(double value) {
        if (value >= 1e6) {
            return String.format(Locale.ROOT, "%.2fM", value / 1e6);
        }
        if (value >= 1e3) {
            return String.format(Locale.ROOT, "%.1fk", value / 1e3);
        }
        return String.format(Locale.ROOT, "%.0f", value);
    }

    /** 3.0e-04. */
    static String lr(double lr) {
        return String.format(Locale.ROOT, "%.1e", lr);
    }

    /** Printf with the root locale, so logs parse the same everywhere. */
    static String f(String format, Object... args) {
        return String.format(Locale.ROOT, format, args);
    }
}
