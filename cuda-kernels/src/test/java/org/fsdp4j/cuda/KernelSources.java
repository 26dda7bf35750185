// The extern "C" kernels of a folder of .cu files, read from the sources themselves: their names
// and the C type (and name) of each parameter. LauncherSignatureTest checks the launchers'
// arguments against these; the emulator tests write their launch plans and kernel table from them
// and fail on a kernel that no test covers; the stand-in driver's trampolines are generated from
// them (StandInToolchain).
package org.fsdp4j.cuda;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

final class KernelSources {

    /** Where the production kernels live, relative to the module (the tests' working directory). */
    static final Path MAIN = Path.of("src/main/cuda");

    private static final Pattern KERNEL = Pattern.compile(
            "extern \"C\" __global__ void (?:__launch_bounds__\\([^)]*\\)\\s*)?(\\w+)\\(([^)]*)\\)", Pattern.DOTALL);
    private static final Pattern GLOBAL = Pattern.compile("\\b__global__\\b");

    /** How a launch passes one C parameter (KernelArgs' packing): a device pointer or a scalar. */
    enum Param {
        POINTER(Long.class), LONG_LONG(Long.class), INT(Integer.class), FLOAT(Float.class);

        final Class<?> javaType;

        Param(Class<?> javaType) {
            this.javaType = javaType;
        }
    }

    /** One parameter as declared: its C type ("const void*"), its name, and how a launch passes it. */
    record Declared(String type, String name, Param param) {
        boolean isVoidPointer() {
            return param == Param.POINTER && type.replace("const", "").replace(" ", "").equals("void*");
        }

        /** A dtype code by the sources' convention: an int named dt or ending in Dt. */
        boolean isDtypeCode() {
            return param == Param.INT && (name.equals("dt") || name.endsWith("Dt"));
        }
    }

    private KernelSources() {
    }

    /** Kernel name → its parameters in order, for every .cu file of {@code dir}, sorted by name. */
    static Map<String, List<Param>> kernels(Path dir) {
        Map<String, List<Param>> out = new TreeMap<>();
        declarations(dir).forEach((k, ds) -> out.put(k, ds.stream().map(Declared::param).toList()));
        return out;
    }

    /** Kernel name → its parameters as declared, for every .cu file of {@code dir}, sorted by name. */
    static Map<String, List<Declared>> declarations(Path dir) {
        Map<String, List<Declared>> out = new TreeMap<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".cu")).sorted()::iterator) {
                String code = Files.readString(f).replaceAll("//[^\n]*", "");
                Matcher m = KERNEL.matcher(code);
                int found = 0;
                while (m.find()) {
                    found++;
                    List<Declared> params = new ArrayList<>();
                    for (String p : m.group(2).split(",")) {
                        String decl = p.trim().replaceAll("\\s+", " ");
                        int space = decl.lastIndexOf(' ');
                        String name = decl.substring(space + 1).replace("*", "");
                        String type = (decl.substring(0, space) + (decl.substring(space + 1).startsWith("*") ? "*" : ""))
                                .replace(" *", "*");
                        params.add(new Declared(type, name, param(decl, m.group(1))));
                    }
                    if (out.put(m.group(1), params) != null) {
                        throw new IllegalStateException("kernel " + m.group(1) + " is defined twice in " + dir);
                    }
                }
                if (GLOBAL.matcher(code).results().count() != found) {   // so no kernel escapes the checks
                    throw new IllegalStateException(f + " has a __global__ function not written as "
                            + "extern \"C\" __global__ void name(...): launchers and tests could not see it");
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the kernel sources in " + dir, e);
        }
        return out;
    }

    private static Param param(String decl, String kernel) {
        String type = decl.substring(0, decl.lastIndexOf(' '));
        if (decl.contains("*")) {
            return Param.POINTER;
        }
        switch (type) {
            case "long long": return Param.LONG_LONG;
            case "int": return Param.INT;
            case "float": return Param.FLOAT;
            default: throw new IllegalStateException("no launch packing for C parameter '" + decl + "' of " + kernel);
        }
    }
}
