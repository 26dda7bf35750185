// Builds the stand-in CUDA libraries (src/test/standin) with the host's g++, in the test build
// only: libcuda.so.1 (the stand-in driver: devices, memory, streams, events, module loading and
// cuLaunchKernel on the emulator-built kernels of src/main/cuda), libcudart.so.13,
// libcublas.so.13 + libcublasLt.so.13 and libnccl.so.2, each with the soname and symbol version
// JavaCPP's JNI libraries ask for. The kernels' trampolines come from their .cu signatures
// (KernelSources): the table lists, for every void* buffer, the dtype-code argument that gives
// its element size. Also writes the stand-in kernel image (the kernels' names), which the fake-GPU
// test runs put on the class path behind the real fatbin, so a build without nvcc still has a
// module to load. Output, under the module's target/cuda-standins: lib/ (the libraries and the
// hash of everything they were built from, so an unchanged build is reused), image/, and
// UNAVAILABLE with the reason instead when there is no C++ compiler.
package org.fsdp4j.cuda;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

final class StandInToolchain {

    static final String FOLDER = "target/cuda-standins";
    static final String UNAVAILABLE = "UNAVAILABLE";
    static final String IMAGE_HEADER = "fsdp4j stand-in kernel image\n";
    static final List<String> LIBRARIES =
            List.of("libcuda.so.1", "libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libnccl.so.2");

    private static final List<String> FLAGS =
            List.of("-std=c++17", "-O2", "-fPIC", "-pthread", "-Wall", "-Wextra", "-ffp-contract=off");

    private StandInToolchain() {
    }

    /**
     * Builds the stand-ins of the module at {@code module} into its target/cuda-standins (or
     * reuses an identical build); empty when they are ready, else why they cannot be built.
     */
    static Optional<String> build(Path module) throws IOException {
        Path out = module.resolve(FOLDER);
        Files.createDirectories(out);
        Files.deleteIfExists(out.resolve(UNAVAILABLE));
        Optional<String> why = EmuToolchain.unavailable();
        if (why.isPresent()) {
            deleteTree(out.resolve("lib"));   // a stale build must not be loaded in its place
            Files.writeString(out.resolve(UNAVAILABLE), why.get() + "\n");
            return why;
        }
        Path standin = module.resolve("src/test/standin");
        Path emulator = module.resolve(EmuToolchain.EMULATOR_DIR);
        Path cuda = module.resolve(KernelSources.MAIN);
        Path headers = module.resolve(EmuToolchain.halfHeaders());
        Path writeUnity = module.resolve(EmuToolchain.WRITE_UNITY);
        writeImage(out.resolve("image"), cuda);
        String hash = digest(headers, List.of(standin, emulator, cuda, writeUnity));
        Path lib = out.resolve("lib");
        if (Files.isRegularFile(lib.resolve("BUILD")) && Files.readString(lib.resolve("BUILD")).strip().equals(hash)
                && LIBRARIES.stream().allMatch(l -> Files.isRegularFile(lib.resolve(l)))) {
            return Optional.empty();
        }
        Path obj = out.resolve("obj");
        deleteTree(obj);
        Path gen = Files.createDirectories(obj.resolve("gen"));
        EmuToolchain.exec(obj, List.of("bash", writeUnity.toAbsolutePath().toString(), cuda.toAbsolutePath().toString(),
                gen.resolve("fsdp4j_kernels.cu").toAbsolutePath().toString()));
        Files.writeString(gen.resolve("standin_kernels.inc"), kernelTable(cuda));

        List<String> emulatorIncludes = List.of("-I" + emulator.toAbsolutePath(), "-I" + gen.toAbsolutePath(),
                "-isystem", headers.toAbsolutePath().toString());
        List<List<String>> compiles = new ArrayList<>();
        for (String unit : List.of("core", "driver", "cudart", "cublas", "cublaslt", "nccl")) {
            compiles.add(compile(standin.resolve(unit + ".cc"), obj.resolve(unit + ".o"), List.of()));
        }
        compiles.add(compile(standin.resolve("standin_kernels.cc"), obj.resolve("standin_kernels.o"), emulatorIncludes));
        for (String unit : List.of("emu_scheduler", "emu_context")) {
            compiles.add(compile(emulator.resolve(unit + ".cc"), obj.resolve(unit + ".o"), emulatorIncludes));
        }
        EmuToolchain.runAll(obj, compiles);

        Path tmp = out.resolve("lib.tmp");
        deleteTree(tmp);
        Files.createDirectories(tmp);
        String cuda1 = tmp.resolve("libcuda.so.1").toAbsolutePath().toString();
        EmuToolchain.exec(obj, link(standin, "libcuda.so.1", "cuda.map", tmp,
                List.of("core.o", "driver.o", "standin_kernels.o", "emu_scheduler.o", "emu_context.o"), List.of("-ldl")));
        EmuToolchain.exec(obj, link(standin, "libcudart.so.13", "cudart.map", tmp, List.of("cudart.o"), List.of(cuda1)));
        EmuToolchain.exec(obj, link(standin, "libcublasLt.so.13", "cublasLt.map", tmp, List.of("cublaslt.o"), List.of()));
        EmuToolchain.exec(obj, link(standin, "libcublas.so.13", "cublas.map", tmp, List.of("cublas.o"), List.of(cuda1)));
        EmuToolchain.exec(obj, link(standin, "libnccl.so.2", "nccl.map", tmp, List.of("nccl.o"), List.of(cuda1)));
        Files.writeString(tmp.resolve("BUILD"), hash + "\n");
        deleteTree(lib);
        Files.move(tmp, lib, StandardCopyOption.ATOMIC_MOVE);
        return Optional.empty();
    }

    /**
     * One STANDIN_KERNEL(name, ...) line per kernel: for each parameter, the index of the dtype-code
     * argument that gives a void* buffer's element size (the first `int ...Dt` after it), else -1.
     */
    static String kernelTable(Path cudaSources) {
        StringBuilder b = new StringBuilder("// written by StandInToolchain from the kernels' signatures\n");
        for (Map.Entry<String, List<KernelSources.Declared>> k : KernelSources.declarations(cudaSources).entrySet()) {
            List<KernelSources.Declared> params = k.getValue();
            b.append("STANDIN_KERNEL(").append(k.getKey());
            for (int i = 0; i < params.size(); i++) {
                int dt = -1;
                if (params.get(i).isVoidPointer()) {
                    for (int j = i + 1; j < params.size() && dt < 0; j++) {
                        if (params.get(j).isDtypeCode()) {
                            dt = j;
                        }
                    }
                    if (dt < 0) {
                        throw new IllegalStateException("kernel " + k.getKey() + ": the void* parameter '"
                                + params.get(i).name() + "' has no dtype code (an int named ...Dt) after it, so"
                                + " the stand-in cannot check its alignment; follow the sources' convention");
                    }
                }
                b.append(", ").append(dt);
            }
            b.append(")\n");
        }
        return b.toString();
    }

    /** The stand-in kernel image: a header line, then every kernel's name on a line. */
    private static void writeImage(Path imageRoot, Path cudaSources) throws IOException {
        Path file = imageRoot.resolve(KernelImage.RESOURCE);
        Files.createDirectories(file.getParent());
        StringBuilder b = new StringBuilder(IMAGE_HEADER);
        for (String k : KernelSources.kernels(cudaSources).keySet()) {
            b.append(k).append('\n');
        }
        if (!Files.isRegularFile(file) || !Files.readString(file).equals(b.toString())) {
            Files.writeString(file, b.toString());
        }
    }

    private static List<String> compile(Path source, Path object, List<String> includes) {
        List<String> cmd = new ArrayList<>(List.of(EmuToolchain.CXX));
        cmd.addAll(FLAGS);
        cmd.addAll(includes);
        cmd.addAll(List.of("-c", source.toAbsolutePath().toString(), "-o", object.toAbsolutePath().toString()));
        return cmd;
    }

    private static List<String> link(Path standin, String soname, String map, Path dir, List<String> objects,
                                     List<String> libraries) {
        List<String> cmd = new ArrayList<>(List.of(EmuToolchain.CXX, "-shared", "-pthread", "-Wl,-soname," + soname,
                "-Wl,--version-script=" + standin.resolve(map).toAbsolutePath(), "-Wl,-rpath,$ORIGIN", "-o",
                dir.resolve(soname).toAbsolutePath().toString()));
        for (String o : objects) {
            cmd.add(dir.resolveSibling("obj").resolve(o).toAbsolutePath().toString());
        }
        cmd.addAll(libraries);
        return cmd;
    }

    private static String digest(Path headers, List<Path> inputs) throws IOException {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            md.update((EmuToolchain.CXX + EmuToolchain.compilerVersion() + FLAGS + headers.toAbsolutePath())
                    .getBytes(StandardCharsets.UTF_8));
            List<Path> files = new ArrayList<>();
            for (Path in : inputs) {
                try (Stream<Path> walk = Files.walk(in)) {
                    walk.filter(Files::isRegularFile).sorted().forEach(files::add);
                }
            }
            for (Path f : files) {
                md.update(f.getFileName().toString().getBytes(StandardCharsets.UTF_8));
                md.update(Files.readAllBytes(f));
            }
            return HexFormat.of().formatHex(md.digest()).substring(0, 16);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) walk.sorted(Comparator.reverseOrder())::iterator) {
                Files.delete(p);
            }
        }
    }
}
