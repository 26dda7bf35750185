// Number formatting for the logs a person reads: bytes in binary units, rates with k/M
// suffixes, learning rates in scientific notation. One place, so every line agrees.
package org.fsdp4j.cli;

import java.util.Locale;

final class Format {

    private Format() {
    }

    /** 1.21 MiB, 3.50 GiB, 512 B. */
    static String bytes(long numBytes) {
        if (numBytes < 1024) {
            return numBytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double v = numBytes;
        int u = -1;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.2f %s", v, units[u]);
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
