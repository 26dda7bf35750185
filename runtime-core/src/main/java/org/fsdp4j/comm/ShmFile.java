// Files under /dev/shm that processes of one host map to share memory (ShmPipe's rings, a
// group's shared buffers). The creator writes every byte before anyone maps it, so a full
// /dev/shm fails here with an IOException instead of a SIGBUS on first touch; the file is
// unlinked once every process has mapped it, and its memory lives until the last mapping goes.
// Each user stamps a random nonce in its own header so a process that maps a path on another
// host's (or container's) /dev/shm finds a stranger's bytes and backs out.
package org.fsdp4j.comm;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;

final class ShmFile {

    static final Path DIRECTORY = Path.of("/dev/shm");
    /** The most one mapping can hold (Java's buffers are int-indexed). */
    static final long MAX_BYTES = Integer.MAX_VALUE;
    private static final SecureRandom RANDOM = new SecureRandom();

    private ShmFile() {
    }

    /** Whether this host has a /dev/shm at all. */
    static boolean available() {
        return Files.isDirectory(DIRECTORY);
    }

    /** A random nonce, never 0 (0 means "no offer" in the messages that carry one). */
    static long nonce() {
        return RANDOM.nextLong() | 1;
    }

    /**
     * A new file of {@code bytes} zeros under /dev/shm, named fsdp4j-*{@code suffix}, mapped
     * whole (native byte order); the file is deleted again if writing or mapping it fails.
     */
    static Created create(String suffix, long bytes) throws IOException {
        Path path = Files.createTempFile(DIRECTORY, "fsdp4j-", suffix);
        try {
            try (FileChannel fc = FileChannel.open(path, StandardOpenOption.WRITE)) {
                ByteBuffer zeros = ByteBuffer.allocateDirect(64 << 10);
                for (long at = 0; at < bytes; at += zeros.limit()) {
                    zeros.clear().limit((int) Math.min(zeros.capacity(), bytes - at));
                    while (zeros.hasRemaining()) {
                        fc.write(zeros, at + zeros.position());
                    }
                }
            }
            return new Created(path, map(path, bytes));
        } catch (IOException | RuntimeException e) {
            delete(path);
            throw e;
        }
    }

    /** A file just created and its mapping. */
    record Created(Path path, MappedByteBuffer map) {
    }

    /** Maps all {@code bytes} of an existing file, read-write, native byte order. */
    static MappedByteBuffer map(Path path, long bytes) throws IOException {
        if (bytes > MAX_BYTES) {
            throw new IOException("a mapping holds at most " + MAX_BYTES + " bytes, not " + bytes);
        }
        try (FileChannel fc = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
            m.order(ByteOrder.nativeOrder());
            return m;
        }
    }

    /**
     * Maps {@code path} if it is the offerer's file as this process sees it: under /dev/shm,
     * {@code bytes} long, with {@code nonce} at byte {@code nonceAt}. Null otherwise (another
     * host's or container's /dev/shm, a file of the same name that is someone else's).
     */
    static MappedByteBuffer openIfOffered(Path path, long bytes, int nonceAt, long nonce) {
        try {
            if (nonce == 0 || !path.startsWith(DIRECTORY) || Files.size(path) != bytes) {
                return null;
            }
            MappedByteBuffer m = map(path, bytes);
            if (m.getLong(nonceAt) == nonce) {
                return m;
            }
            unmap(m);
            return null;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** Unlinks {@code path} if it is there (null: nothing); the mappings keep its memory. */
    static void delete(Path path) {
        if (path != null) {
            try {
                Files.deleteIfExists(path);
            } catch (IOException ignored) {
                // the file is in /dev/shm; nothing else refers to it
            }
        }
    }

    /**
     * Unmaps {@code b} at once where the JDK allows it (sun.misc.Unsafe), else leaves it to the
     * collector. The caller guarantees nothing touches the mapping afterwards: that would crash
     * the process.
     */
    static void unmap(MappedByteBuffer b) {
        Unmapper.unmap(b);
    }

    private static final class Unmapper {
        private static final Object UNSAFE;
        private static final Method INVOKE_CLEANER;

        static {
            Object unsafe = null;
            Method m = null;
            try {
                Class<?> c = Class.forName("sun.misc.Unsafe");
                Field f = c.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                unsafe = f.get(null);
                m = c.getMethod("invokeCleaner", ByteBuffer.class);
            } catch (ReflectiveOperationException | RuntimeException e) {
                unsafe = null;
                m = null;
            }
            UNSAFE = unsafe;
            INVOKE_CLEANER = m;
        }

        static void unmap(MappedByteBuffer b) {
            if (INVOKE_CLEANER != null) {
                try {
                    INVOKE_CLEANER.invoke(UNSAFE, b);
                } catch (ReflectiveOperationException | RuntimeException e) {
                    // left to the garbage collector
                }
            }
        }
    }
}
