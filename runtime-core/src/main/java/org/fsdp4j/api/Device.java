// Where a tensor lives: the host ("cpu") or one GPU ("cuda:i"). Parsed from the command line.
package org.fsdp4j.api;

import java.util.Locale;

/**
 * Where a tensor lives and a rank computes: the host ({@code cpu}) or one CUDA GPU
 * ({@code cuda:i}). Immutable; {@link #toString()} gives the form {@link #parse} reads.
 *
 * @param kind  the host or a GPU
 * @param index the GPU's CUDA device ordinal; always 0 for the CPU
 */
public record Device(Kind kind, int index) {

    /** The kinds of device a backend can run on. */
    public enum Kind {
        /** The host: the CPU backend, in host memory. */
        CPU,
        /** An NVIDIA GPU: the CUDA backend (module cuda-kernels), in device memory. */
        CUDA
    }

    /** The host, {@code cpu}. */
    public static final Device CPU = new Device(Kind.CPU, 0);

    /**
     * Checks the values.
     *
     * @param kind  the host or a GPU
     * @param index the GPU's CUDA device ordinal; always 0 for the CPU
     * @throws IllegalArgumentException if {@code kind} is null, {@code index} is negative, or the
     *                                  CPU is given an index other than 0
     */
    public Device {
        if (kind == null) {
            throw new IllegalArgumentException("device kind is null");
        }
        if (index < 0) {
            throw new IllegalArgumentException("device index must be >= 0, got " + index);
        }
        if (kind == Kind.CPU && index != 0) {
            throw new IllegalArgumentException("the cpu device has no index (got cpu:" + index + ")");
        }
    }

    /**
     * GPU {@code index}.
     *
     * @param index the CUDA device ordinal, 0 or more (whether that GPU exists is checked when a
     *              backend opens it, not here)
     * @return {@code cuda:index}
     * @throws IllegalArgumentException if {@code index} is negative
     */
    public static Device cuda(int index) {
        return new Device(Kind.CUDA, index);
    }

    /**
     * Parses a device as the command line gives it, ignoring case and surrounding blanks.
     *
     * @param text "cpu", "cuda" or "gpu" (both mean {@code cuda:0}), or "cuda:i"
     * @return the device
     * @throws IllegalArgumentException if the text is none of these or the index is negative
     */
    public static Device parse(String text) {
        String t = text.trim().toLowerCase(Locale.ROOT);
        if (t.equals("cpu")) {
            return CPU;
        }
        if (t.equals("cuda") || t.equals("gpu")) {
            return cuda(0);
        }
        if (t.startsWith("cuda:")) {
            try {
                return cuda(Integer.parseInt(t.substring(5)));
            } catch (NumberFormatException e) {
                // fall through to the error below
            }
        }
        throw new IllegalArgumentException("unknown device '" + text + "': use cpu, cuda or cuda:<index>");
    }

    /**
     * Whether this is the host.
     *
     * @return true for {@link #CPU}
     */
    public boolean isCpu() {
        return kind == Kind.CPU;
    }

    /**
     * The device as {@link #parse} reads it.
     *
     * @return "cpu" or "cuda:i"
     */
    @Override
    public String toString() {
        return kind == Kind.CPU ? "cpu" : "cuda:" + index;
    }
}
