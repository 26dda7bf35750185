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
    static String bytesSplit(long total, java.util.Map<org.fsdp4j.api.MemoryCategory, Long> parts) {
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

    /**
     * A float flag's value as a person writes it: 0.001, 1e-4, 0.1, 1 (at most 6 significant digits,
     * so lr / 10 in float is 1e-4, not Float.toString's 1.00000005E-4).
     */
    static String number(float x) {
        if (!Float.isFinite(x) || x == 0) {
            return x == 0 ? "0" : String.valueOf(x);
        }
        return org.fsdp4j.model.HfModelConfig.plain(Double.parseDouble(String.format(Locale.ROOT, "%.5e", x)));
    }

    /** 850 ms, 42 s, 7 min, 2 h 13 min, 3.4 days. */
    static String duration(double seconds) {
        if (!Double.isFinite(seconds)) {
            return "unknown";
        }
        if (seconds < 1) {
            return f("%.0f ms", seconds * 1e3);
        }
        if (seconds < 90) {
            return f("%.0f s", seconds);
        }
        if (seconds < 90 * 60) {
            return f("%.0f min", seconds / 60);
        }
        if (seconds < 48 * 3600) {
            long minutes = Math.round(seconds / 60);
            return f("%d h %02d min", minutes / 60, minutes % 60);
        }
        return f("%.1f days", seconds / 86400);
    }

    /** Parses "512MiB", "12GiB", "1.5G", "800m" or plain bytes; binary units (K, M, G, T = 2^10...). */
    static long parseBytes(String text) {
        String t = text.trim().toUpperCase(Locale.ROOT).replace("IB", "").replace("B", "");
        int u = "KMGT".indexOf(t.isEmpty() ? ' ' : t.charAt(t.length() - 1)) + 1;
        try {
            double v = Double.parseDouble(u > 0 ? t.substring(0, t.length() - 1).trim() : t);
            double bytes = v * Math.pow(1024, u);
            if (!(bytes >= 1) || bytes > Long.MAX_VALUE) {
                throw new NumberFormatException();
            }
            return (long) bytes;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + text + "' is not a size: use bytes or a number with KiB, MiB, GiB"
                    + " or TiB, e.g. 12GiB");
        }
    }

    /** Printf with the root locale, so logs parse the same everywhere. */
    static String f(String format, Object... args) {
        return String.format(Locale.ROOT, format, args);
    }
}
