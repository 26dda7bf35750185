// Where a tensor lives: the host ("cpu") or one GPU ("cuda:i"). Parsed from the command line.
package org.fsdp4j.api;

import java.util.Locale;

public record Device(Kind kind, int index) {

    public enum Kind { CPU, CUDA }

    public static final Device CPU = new Device(Kind.CPU, 0);

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

    public static Device cuda(int index) {
        return new Device(Kind.CUDA, index);
    }

    /** Parses "cpu", "cuda" (= cuda:0) or "cuda:i". */
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

    public boolean isCpu() {
        return kind == Kind.CPU;
    }

    @Override
    public String toString() {
        return kind == Kind.CPU ? "cpu" : "cuda:" + index;
    }
}
