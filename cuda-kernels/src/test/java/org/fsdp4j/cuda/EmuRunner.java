// Runs one EmuCase on an emulator build: writes its plan (buffers, then the recorded launches with
// each fake device address turned back into buffer + offset) and its initial image, runs the
// runner under the given schedules, and returns the exit status, the emulator's and sanitizers'
// messages, and the memory the first schedule left. The files stay in the build's runs/ folder
// when the runner fails (or always, with EMU_KEEP set), to rerun it by hand:
//   runner X.plan X.in X.out asc,desc,rand,grid1,grid3 SEED
package org.fsdp4j.cuda;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

final class EmuRunner {

    /** Every thread and block order, then grid-stride launches on 1 and 3 blocks (runner.cc). */
    static final String ALL_SCHEDULES = "asc,desc,rand,grid1,grid3";
    /** A kernel still running after this is stuck in a loop (deadlocks are reported at once). */
    private static final long TIMEOUT_S = 120;

    record Result(int exitCode, String messages, List<ByteBuffer> image, double seconds) {
        boolean ok() {
            return exitCode == 0;
        }
    }

    private EmuRunner() {
    }

    static Result run(Path runner, EmuCase c, String schedules, long seed) {
        try {
            Path dir = Files.createDirectories(runner.getParent().resolve("runs"));
            String stem = c.name.replaceAll("[^A-Za-z0-9_.=-]+", "_") + "-" + schedules.replace(',', '_');
            Path plan = dir.resolve(stem + ".plan");
            Path in = dir.resolve(stem + ".in");
            Path out = dir.resolve(stem + ".out");
            Path log = dir.resolve(stem + ".log");
            Files.writeString(plan, plan(c.device));
            List<ByteBuffer> initial = c.device.initialImage();
            try (SeekableByteChannel ch = Files.newByteChannel(in, StandardOpenOption.CREATE,
                    StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
                for (ByteBuffer b : initial) {
                    ch.write(b.duplicate().clear());
                }
            }
            ProcessBuilder pb = new ProcessBuilder(runner.toAbsolutePath().toString(), plan.toString(), in.toString(),
                    out.toString(), schedules, Long.toUnsignedString(seed))
                    .redirectErrorStream(true).redirectOutput(log.toFile());
            pb.environment().put("ASAN_OPTIONS", "detect_leaks=0:halt_on_error=1");
            pb.environment().put("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1");
            long start = System.nanoTime();
            Process p = pb.start();
            if (!p.waitFor(TIMEOUT_S, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                return new Result(-1, "timed out after " + TIMEOUT_S + " s (a kernel loops forever?)", List.of(),
                        TIMEOUT_S);
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            String messages = Files.readString(log);
            if (p.exitValue() != 0) {
                return new Result(p.exitValue(), messages, List.of(), seconds);
            }
            ByteBuffer all = ByteBuffer.wrap(Files.readAllBytes(out));
            List<ByteBuffer> image = new ArrayList<>();
            for (ByteBuffer b : initial) {
                ByteBuffer slice = all.slice(all.position(), b.capacity()).order(ByteOrder.LITTLE_ENDIAN);
                all.position(all.position() + b.capacity());
                image.add(slice);
            }
            if (System.getenv("EMU_KEEP") == null) {
                for (Path f : List.of(plan, in, out, log)) {
                    Files.delete(f);
                }
            }
            return new Result(0, messages, image, seconds);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + runner + " on " + c, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + c, e);
        }
    }

    /** The plan text runner.cc reads. */
    static String plan(EmuDevice device) {
        StringBuilder s = new StringBuilder();
        List<ByteBuffer> buffers = device.initialImage();
        for (int i = 0; i < buffers.size(); i++) {
            s.append("buffer ").append(i).append(' ').append(buffers.get(i).capacity()).append('\n');
        }
        for (EmuDevice.Launch l : device.launches()) {
            s.append("launch ").append(l.kernel()).append(' ').append(l.gridX()).append(' ').append(l.gridY())
                    .append(' ').append(l.blockX()).append(' ').append(l.blockY()).append(' ')
                    .append(l.strided() ? 1 : 0);
            List<KernelSources.Param> params = EmuDevice.KERNELS.get(l.kernel());
            for (int i = 0; i < l.args().length; i++) {
                s.append(' ').append(arg(params.get(i), l.args()[i], buffers.size(), l.kernel(), i));
            }
            s.append('\n');
        }
        return s.toString();
    }

    private static String arg(KernelSources.Param p, Object a, int buffers, String kernel, int i) {
        switch (p) {
            case POINTER: {
                if ((Long) a == 0L) {
                    return "n";   // an optional operand left out
                }
                long rel = (Long) a - EmuDevice.BASE;
                long buffer = rel >>> 32;
                if (rel < 0 || buffer >= buffers) {
                    throw new IllegalArgumentException(kernel + " argument " + i + ": 0x" + Long.toHexString((Long) a)
                            + " is not an emulator buffer's address");
                }
                return "p" + buffer + "+" + (rel & 0xffff_ffffL);
            }
            case LONG_LONG: return "l" + a;
            case INT: return "i" + a;
            case FLOAT: return "f" + Integer.toHexString(Float.floatToRawIntBits((Float) a));
            default: throw new IllegalArgumentException(String.valueOf(p));
        }
    }
}
