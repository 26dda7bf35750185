// The fatbin that nvcc built from src/main/cuda (all kernels, every architecture), read from
// the jar. Free of CUDA classes, so the probe and the tests can look at it without a GPU.
package org.fsdp4j.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Optional;

public final class KernelImage {

    /** Classpath location written by src/main/scripts/build-fatbin.sh. */
    public static final String RESOURCE = "org/fsdp4j/cuda/fsdp4j_kernels.fatbin";

    private static volatile Optional<byte[]> cached;

    private KernelImage() {
    }

    /** The fatbin bytes, or empty when this jar was built without nvcc. */
    public static Optional<byte[]> bytes() {
        Optional<byte[]> b = cached;
        if (b == null) {
            synchronized (KernelImage.class) {
                b = cached;
                if (b == null) {
                    b = read();
                    cached = b;
                }
            }
        }
        return b;
    }

    private static Optional<byte[]> read() {
        try (InputStream in = KernelImage.class.getClassLoader().getResourceAsStream(RESOURCE)) {
            return in == null ? Optional.empty() : Optional.of(in.readAllBytes());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + RESOURCE + " from the classpath", e);
        }
    }
}
