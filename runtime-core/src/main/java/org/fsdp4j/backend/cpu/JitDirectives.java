// Keeps the CPU backend's vector row loops out of their callers' JIT compilations.
//
// Why: C2 inlines hot callees into a method until the method's graph reaches a fixed node budget
// (NodeCountInliningCutoff, 18,000, not settable in a product JVM). A Vector API op that falls
// beyond the budget is not intrinsified: it runs as a Java fallback that allocates a vector
// object per op. The row loops (LayerNorm, GELU, softmax, AdamW, ...) fit the budget when C2
// compiles each on its own, but C2 inlined them into the chunk lambdas that call them, together
// with the loads and stores around them, and then ran the later ones boxed. Measured on `small`
// at T = 256: ~0.7 GB allocated per step, LayerNorm backward 5.3 ms a call.
//
// What: the first CPU backend of a JVM adds one compiler directive (the JDK's DiagnosticCommand
// Compiler.directives_add, as `jcmd <pid> Compiler.directives_add` does) telling C1 and C2 not to
// inline the methods marked @CompiledAlone into any method of this package. The results are the
// same bits either way (the fallbacks compute what the intrinsics compute); only speed and
// allocation change. Where the JVM lacks the jdk.management module the directive is skipped,
// and reason() says why. -Dfsdp4j.jitDirectives=false skips it too (for before/after measurements).
package org.fsdp4j.backend.cpu;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;
import javax.management.ObjectName;

final class JitDirectives {

    /** The classes whose @CompiledAlone methods are kept out of their callers. */
    static final List<Class<?>> KERNEL_CLASSES = List.of(Simd.class, LayerNormOps.class, ElementwiseOps.class,
            Gelu.class, AttentionOps.class, OptimizerOps.class, TileGemm.class);

    /** The callers the directive applies to: every class of this package (lambdas included). */
    static final String CALLERS = "org/fsdp4j/backend/cpu/*.*";

    private static Optional<String> reason;   // empty once installed; guarded by the class

    private JitDirectives() {
    }

    /** Installs the directive once per JVM (later calls return at once); never throws. */
    static synchronized void installOnce() {
        if (reason != null) {
            return;
        }
        if (!Fsdp4jSystemProperties.jitDirectives()) {
            reason = Optional.of("switched off by -Dfsdp4j.jitDirectives=false");
            return;
        }
        try {
            Path file = Files.createTempFile("fsdp4j-jit", ".json");
            try {
                Files.writeString(file, directive(), StandardCharsets.UTF_8);
                Object out = ManagementFactory.getPlatformMBeanServer().invoke(
                        new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerDirectivesAdd",
                        new Object[] {new String[] {file.toString()}}, new String[] {String[].class.getName()});
                String said = String.valueOf(out).trim();
                reason = said.startsWith("1 compiler directives added") ? Optional.empty()
                        : Optional.of("the JVM did not take the directive: " + said);
            } finally {
                Files.deleteIfExists(file);
            }
        } catch (IOException | javax.management.JMException | RuntimeException | LinkageError e) {
            reason = Optional.of("the JVM offers no DiagnosticCommand (module jdk.management): " + e);
        }
    }

    /** Empty when the directive is in place; otherwise why not (null before installOnce). */
    static synchronized Optional<String> reason() {
        return reason;
    }

    /** "Class.method" (binary names with '/') of every @CompiledAlone method, sorted. */
    static List<String> kernels() {
        TreeSet<String> names = new TreeSet<>();
        for (Class<?> c : KERNEL_CLASSES) {
            for (Method m : c.getDeclaredMethods()) {
                if (m.isAnnotationPresent(CompiledAlone.class)) {
                    names.add(c.getName().replace('.', '/') + "." + m.getName());
                }
            }
        }
        return new ArrayList<>(names);
    }

    /** The directive's JSON: for callers in this package, no inlining of the kernels (C1 and C2). */
    static String directive() {
        StringBuilder inline = new StringBuilder();
        for (String k : kernels()) {
            inline.append(inline.length() == 0 ? "" : ", ").append("\"-").append(k).append('"');
        }
        return "[{ match: \"" + CALLERS + "\", inline: [" + inline + "] }]";
    }
}
