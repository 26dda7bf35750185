// Builds the CUDA execution emulator (src/test/emulator) with the host's g++: the kernels of a
// source folder (src/main/cuda, or a mutated copy of it) as one unity file exactly as
// build-fatbin.sh gives nvcc, plus the scheduler and the plan runner, in two flavours: PLAIN,
// and SANITIZED (AddressSanitizer + UBSan, and FMA contraction where the host has FMA, as nvcc
// contracts by default). Builds go to target/cuda-emulator/<flavour>-<hash of every input>, so
// an unchanged build is reused; compiles run in parallel. Without g++ the tests skip, saying why.
package org.fsdp4j.cuda;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;

final class EmuToolchain {

    static final Path EMULATOR_DIR = Path.of("src/test/emulator");
    static final Path WRITE_UNITY = Path.of("src/main/scripts/write-unity.sh");
    static final Path BUILD_DIR = Path.of("target/cuda-emulator");

    enum Flavor {
        PLAIN, SANITIZED;

        List<String> flags() {
            List<String> f = new ArrayList<>(List.of("-std=c++17", "-O1", "-Wall", "-Wextra"));
            if (this == SANITIZED) {
                f.addAll(List.of("-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        "-fno-omit-frame-pointer"));
                if (hostHasFma()) {
                    f.addAll(List.of("-mfma", "-ffp-contract=fast"));
                }
            } else {
                f.add("-ffp-contract=off");
            }
            return f;
        }
    }

    static final String CXX = Optional.ofNullable(System.getenv("CXX")).orElse("g++");
    private static volatile Optional<String> unavailable;
    /** What CXX --version printed: part of every build's hash, so a new compiler rebuilds. */
    private static volatile String compilerVersion = "";

    /** What CXX --version printed (after unavailable() has probed it). */
    static String compilerVersion() {
        unavailable();
        return compilerVersion;
    }
    private static final AtomicBoolean SKIP_SAID = new AtomicBoolean();

    private EmuToolchain() {
    }

    /** Why the emulator cannot run on this machine (no C++ compiler), or empty when it can. */
    static Optional<String> unavailable() {
        Optional<String> u = unavailable;
        if (u == null) {
            u = probe();
            unavailable = u;
        }
        return u;
    }

    /**
     * {@code tests}, or where the emulator cannot run here one test skipped with the reason, also
     * printed (JUnit reports nothing at all for an assumption that fails inside a @TestFactory).
     */
    static Stream<DynamicTest> unlessUnavailable(Supplier<Stream<DynamicTest>> tests) {
        Optional<String> reason = unavailable();
        if (reason.isEmpty()) {
            return tests.get();
        }
        if (SKIP_SAID.compareAndSet(false, true)) {
            System.out.println("[emulator] skipped: " + reason.get());
        }
        return Stream.of(DynamicTest.dynamicTest("skipped", () -> Assumptions.assumeTrue(false, reason.get())));
    }

    private static Optional<String> probe() {
        try {
            Process p = new ProcessBuilder(CXX, "--version").redirectErrorStream(true).start();
            compilerVersion = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (p.waitFor() != 0) {
                return Optional.of(CXX + " --version failed: cannot build the CUDA emulator");
            }
            return Optional.empty();
        } catch (IOException e) {
            return Optional.of(CXX + " not found (set CXX or install g++): the CUDA emulator tests need a C++ compiler");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.of("interrupted while looking for " + CXX);
        }
    }

    static boolean hostHasFma() {
        try {
            return Files.readString(Path.of("/proc/cpuinfo")).matches("(?s).*\\bflags\\s*:[^\\n]*\\bfma\\b.*");
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Where cuda_fp16.h and cuda_bf16.h come from: the CUDA toolkit's include folder when there
     * is one ($CUDA_HOME, nvcc's, /usr/local/cuda), else the emulator's fallback (DType's rounding).
     */
    static Path halfHeaders() {
        List<Path> candidates = new ArrayList<>();
        Optional.ofNullable(System.getenv("CUDA_HOME")).ifPresent(h -> candidates.add(Path.of(h, "include")));
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            Path nvcc = Path.of(dir, "nvcc");
            if (Files.isExecutable(nvcc)) {
                try {
                    candidates.add(nvcc.toRealPath().getParent().resolveSibling("include"));
                } catch (IOException e) {
                    // an unreadable link: try the next candidate
                }
            }
        }
        candidates.add(Path.of("/usr/local/cuda/include"));
        for (Path c : candidates) {
            if (Files.isRegularFile(c.resolve("cuda_fp16.h")) && Files.isRegularFile(c.resolve("cuda_bf16.h"))) {
                return c;
            }
        }
        return EMULATOR_DIR.resolve("fallback");
    }

    /** The runner over src/main/cuda. */
    static Path runner(Flavor flavor) {
        return runner(flavor, KernelSources.MAIN);
    }

    /**
     * The runner over the kernels of {@code cudaSources}. The scheduler and runner objects are
     * shared by every build of a flavour; only the kernels' unity is compiled per source folder.
     */
    static synchronized Path runner(Flavor flavor, Path cudaSources) {
        Path headers = halfHeaders();
        Path common = BUILD_DIR.resolve(flavor + "-" + digest(flavor.flags(), headers, null));
        Path dir = BUILD_DIR.resolve(flavor + "-" + digest(flavor.flags(), headers, cudaSources));
        Path runner = dir.resolve("runner");
        if (Files.isExecutable(runner)) {
            return runner;
        }
        try {
            List<String> includes = generate(dir, cudaSources, headers);
            List<List<String>> compiles = new ArrayList<>();
            compiles.add(compile(flavor, includes, "emu_kernels", dir));
            Files.createDirectories(common);
            for (String unit : List.of("emu_context", "emu_scheduler", "runner")) {
                if (!Files.isRegularFile(common.resolve(unit + ".o"))) {
                    compiles.add(compile(flavor, includes, unit, common));
                }
            }
            runAll(dir, compiles);
            for (List<String> c : compiles) {   // each object appears whole, or not at all
                String tmp = c.get(c.size() - 1);
                Files.move(Path.of(tmp), Path.of(tmp.substring(0, tmp.length() - ".tmp".length())));
            }
            List<String> link = new ArrayList<>(List.of(CXX));
            link.addAll(flavor.flags());
            link.add(dir.resolve("emu_kernels.o").toAbsolutePath().toString());
            for (String unit : List.of("emu_context", "emu_scheduler", "runner")) {
                link.add(common.resolve(unit + ".o").toAbsolutePath().toString());
            }
            link.addAll(List.of("-o", runner.toAbsolutePath() + ".tmp"));
            exec(dir, link);
            Files.move(Path.of(runner + ".tmp"), runner);
            return runner;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot build the CUDA emulator in " + dir, e);
        }
    }

    /**
     * Writes {@code dir}/gen: the unity file of {@code cudaSources} (write-unity.sh) and
     * kernel_list.inc; returns the include flags emu_kernels.cc compiles with.
     */
    private static List<String> generate(Path dir, Path cudaSources, Path headers) throws IOException {
        Path gen = Files.createDirectories(dir.resolve("gen"));
        exec(dir, List.of("bash", WRITE_UNITY.toAbsolutePath().toString(), cudaSources.toAbsolutePath().toString(),
                gen.resolve("fsdp4j_kernels.cu").toAbsolutePath().toString()));
        StringBuilder list = new StringBuilder();
        for (Path d : List.of(cudaSources, EMULATOR_DIR)) {
            for (String k : KernelSources.kernels(d).keySet()) {
                list.append("EMU_KERNEL(").append(k).append(")\n");
            }
        }
        Files.writeString(gen.resolve("kernel_list.inc"), list.toString());
        return List.of("-I" + EMULATOR_DIR.toAbsolutePath(), "-I" + gen.toAbsolutePath(), "-isystem",
                headers.toAbsolutePath().toString());
    }

    /** Compiles (without generating code) src/main/cuda's kernels and the emulator against {@code headers}. */
    static synchronized void checkCompiles(Path headers) {
        Path dir = BUILD_DIR.resolve("syntax-" + digest(List.of(), headers, KernelSources.MAIN));
        try {
            List<String> includes = generate(dir, KernelSources.MAIN, headers);
            List<List<String>> checks = new ArrayList<>();
            for (String unit : List.of("emu_kernels", "emu_scheduler")) {
                List<String> cmd = new ArrayList<>(List.of(CXX));
                cmd.addAll(Flavor.PLAIN.flags());
                cmd.addAll(includes);
                cmd.addAll(List.of("-fsyntax-only", EMULATOR_DIR.resolve(unit + ".cc").toAbsolutePath().toString()));
                checks.add(cmd);
            }
            runAll(dir, checks);
        } catch (IOException e) {
            throw new UncheckedIOException("the emulator does not compile against " + headers, e);
        }
    }

    /** A compile of emulator unit {@code unit} into {@code outDir}/unit.o.tmp (renamed once all succeed). */
    private static List<String> compile(Flavor flavor, List<String> includes, String unit, Path outDir) {
        List<String> cmd = new ArrayList<>(List.of(CXX));
        cmd.addAll(flavor.flags());
        cmd.addAll(includes);
        cmd.addAll(List.of("-c", EMULATOR_DIR.resolve(unit + ".cc").toAbsolutePath().toString(), "-o",
                outDir.resolve(unit + ".o.tmp").toAbsolutePath().toString()));
        return cmd;
    }

    /** Compiles a standalone C++ file of the emulator folder against {@code headers}. */
    static synchronized Path program(String source, Path headers) {
        Path dir = BUILD_DIR.resolve(source.replace(".cc", "") + "-" + digest(List.of(), headers, null));
        Path exe = dir.resolve(source.replace(".cc", ""));
        if (Files.isExecutable(exe)) {
            return exe;
        }
        try {
            Files.createDirectories(dir);
            exec(dir, List.of(CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-isystem",
                    headers.toAbsolutePath().toString(), EMULATOR_DIR.resolve(source).toAbsolutePath().toString(),
                    "-o", exe.toAbsolutePath() + ".tmp"));
            Files.move(Path.of(exe + ".tmp"), exe);
            return exe;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot build " + source, e);
        }
    }

    /** Runs {@code commands} (at most one per core at a time) in {@code dir}; the first failure is thrown. */
    static void runAll(Path dir, List<List<String>> commands) throws IOException {
        int parallel = Math.max(1, Math.min(commands.size(), Runtime.getRuntime().availableProcessors()));
        ExecutorService pool = Executors.newFixedThreadPool(parallel);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (List<String> c : commands) {
                done.add(pool.submit(() -> {
                    exec(dir, c);
                    return null;
                }));
            }
            for (Future<?> f : done) {
                try {
                    f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    if (e.getCause() instanceof IOException io) {
                        throw io;
                    }
                    throw new IllegalStateException(e.getCause());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while compiling the emulator", e);
                }
            }
        } finally {
            pool.shutdownNow();
        }
    }

    static void exec(Path dir, List<String> command) throws IOException {
        Path log = Files.createTempFile(Files.createDirectories(dir), "cmd", ".log");
        Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                throw new IOException("timed out: " + String.join(" ", command));
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + String.join(" ", command), e);
        }
        String output = Files.readString(log);
        Files.delete(log);
        if (p.exitValue() != 0) {
            throw new IOException("failed (exit " + p.exitValue() + "): " + String.join(" ", command) + "\n" + output);
        }
        if (!output.isBlank()) {   // warnings: shown, though they do not fail the build
            System.out.print("[emulator] " + String.join(" ", command) + "\n" + output);
        }
    }

    /** A short hash of everything a build depends on: flags, headers, emulator and kernel sources. */
    private static String digest(List<String> flags, Path headers, Path cudaSources) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            unavailable();   // probes the compiler once, which sets compilerVersion
            md.update((CXX + compilerVersion + flags + headers.toAbsolutePath()).getBytes(StandardCharsets.UTF_8));
            List<Path> inputs = new ArrayList<>(List.of(WRITE_UNITY));
            for (Path dir : cudaSources == null ? List.of(EMULATOR_DIR) : List.of(EMULATOR_DIR, cudaSources)) {
                try (Stream<Path> files = Files.walk(dir)) {
                    files.filter(Files::isRegularFile).sorted().forEach(inputs::add);
                }
            }
            for (Path f : inputs) {
                md.update(f.toString().getBytes(StandardCharsets.UTF_8));
                md.update(Files.readAllBytes(f));
            }
            return HexFormat.of().formatHex(md.digest()).substring(0, 16);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
