// The stand-ins' teeth: three classic bugs of a CUDA backend are planted, one at a time, in a copy
// of this module's main sources (compiled here, loaded in front of the real classes by a
// child-first class loader), and the gpu test that guards each one must fail against the
// stand-ins, where on a machine without a GPU nothing ran before:
//   - a GEMM given the leading dimension of the transposed operand (cuBLAS says
//     CUBLAS_STATUS_INVALID_VALUE where it is too small, and the product is wrong where it is not);
//   - a tensor's offset added to its device address in elements instead of bytes (a view then
//     points into the wrong place, and mostly at an address no float may sit on);
//   - a block freed on one stream while another stream still reads it (the allocator ignores
//     recordStream: the block's next owner writes before the reader has read).
// (The fourth fault of the issue, a collective issued in a different order on two ranks, is
// nccl-comm's StandInNcclOrderTest.) A fault whose text is no longer in the sources fails loudly, so
// the suite cannot lose a tooth quietly. Fake-GPU run only (tag "standin"): each fault leaves the
// stand-in device with a sticky error, which cudaDeviceReset clears.
package org.fsdp4j.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;

import java.io.IOException;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.core.LauncherConfig;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

@Tag("standin")
class StandInPlantedFaultsTest {

    static final Path MAIN_SOURCES = Path.of("src/main/java/org/fsdp4j/cuda");
    static final Path WORK = Path.of("target/standin-faults");

    /** A fault: one exact text in one source file replaced; the gpu test method that must then fail, and a word of its failure. */
    record Fault(String name, String file, String from, String to, String testClass, String method, String[] params,
                 String failureSays) {
    }

    static final List<Fault> FAULTS = List.of(
            new Fault("GEMM with a transposed leading dimension", "CublasGemm.java",
                    "cudaType(a), lda, betaP", "cudaType(a), transA ? k : m, betaP",
                    "org.fsdp4j.cuda.CudaBackendConformanceTest", "gemmEveryTransposeDtypeAndBatch", new String[0],
                    "gemm"),
            new Fault("offset in elements instead of bytes", "DeviceTensors.java",
                    "return s.address() + t.byteOffset();", "return s.address() + t.byteOffset() / t.dtype().byteSize();",
                    "org.fsdp4j.cuda.CudaGptParityTest", "logitsLossAndEveryGradientMatchPyTorch",
                    new String[] {"java.lang.String"}, "logits"),
            new Fault("buffer freed on one stream while another still reads it", "CudaBackend.java",
                    "allocator.free(block, events);", "allocator.free(block, List.of());",
                    "org.fsdp4j.cuda.CudaRuntimeTest", "aRecordedStreamKeepsItsBlockAndNoStreamWaitsForAFree",
                    new String[0], "freed"));

    @TestFactory
    Stream<DynamicTest> everyPlantedFaultFailsItsGpuTest() {
        return FAULTS.stream().map(f -> DynamicTest.dynamicTest(f.name, () -> caught(f)));
    }

    private static void caught(Fault f) throws Exception {
        CudaProbe.Result probe = StandIns.assumeStandIns();
        Path classes = compile(f);
        TestExecutionSummary s;
        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        try (URLClassLoader planted = new ChildFirst(classes, Path.of("target/test-classes"), previous)) {
            // ServiceLoader (Backends.create) finds the planted CudaBackendProvider through the context loader
            Thread.currentThread().setContextClassLoader(planted);
            s = run(planted.loadClass(f.testClass), f.method, f.params);
        } finally {
            Thread.currentThread().setContextClassLoader(previous);
            resetDevices(probe.deviceCount());
        }
        assertEquals(1, s.getTestsFoundCount() > 0 ? 1 : 0, "the check " + f.testClass + "#" + f.method + " was not found");
        List<String> failures = s.getFailures().stream()
                .map(x -> x.getTestIdentifier().getDisplayName() + ": " + x.getException())
                .collect(Collectors.toList());
        assertTrue(!failures.isEmpty(), "planted fault '" + f.name + "' was not caught: " + f.testClass + "#" + f.method
                + " passed " + s.getTestsSucceededCount() + " of " + s.getTestsFoundCount());
        String all = String.join("\n", failures);
        assertTrue(all.contains(f.failureSays), "planted fault '" + f.name + "' failed its check, but not as expected:\n"
                + all);
        System.out.println("planted fault '" + f.name + "' caught by " + f.testClass.substring(f.testClass.lastIndexOf('.') + 1)
                + "#" + f.method + ": " + firstLine(failures.get(0)));
    }

    /** This module's main sources with the fault planted, compiled; its text must occur exactly once. */
    private static Path compile(Fault f) throws IOException {
        Path dir = WORK.resolve(f.name.replaceAll("[^A-Za-z]+", "-"));
        Path src = dir.resolve("src");
        Path out = dir.resolve("classes");
        for (Path d : List.of(src, out)) {
            if (Files.exists(d)) {
                try (Stream<Path> walk = Files.walk(d)) {
                    walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
            Files.createDirectories(d);
        }
        List<String> files = new ArrayList<>();
        try (Stream<Path> list = Files.list(MAIN_SOURCES)) {
            for (Path p : (Iterable<Path>) list.filter(x -> x.toString().endsWith(".java"))::iterator) {
                String text = Files.readString(p);
                if (p.getFileName().toString().equals(f.file)) {
                    int at = text.indexOf(f.from);
                    assertTrue(at >= 0, "fault '" + f.name + "': its code is no longer in " + f.file + "; plant it anew");
                    assertEquals(-1, text.indexOf(f.from, at + 1), "fault '" + f.name + "': its code occurs twice");
                    text = text.substring(0, at) + f.to + text.substring(at + f.from.length());
                }
                Path copy = src.resolve(p.getFileName());
                Files.writeString(copy, text);
                files.add(copy.toString());
            }
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        List<String> args = new ArrayList<>(List.of("-nowarn", "-proc:none", "--release", "17", "-cp",
                System.getProperty("java.class.path"), "-d", out.toString()));
        args.addAll(files);
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        int rc = javac.run(null, null, err, args.toArray(String[]::new));
        assertEquals(0, rc, "the planted sources do not compile:\n" + err);
        return out;
    }

    /** Runs one test method (every parameter of a parameterised one) with JUnit, outside this run's listeners. */
    private static TestExecutionSummary run(Class<?> testClass, String method, String[] params) {
        Launcher launcher = LauncherFactory.create(LauncherConfig.builder()
                .enableTestExecutionListenerAutoRegistration(false).build());
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        launcher.execute(LauncherDiscoveryRequestBuilder.request()
                .selectors(selectMethod(testClass, method, String.join(",", params))).build(), summary);
        return summary.getSummary();
    }

    /** Clears what the fault left on the stand-in devices (a sticky error, streams, memory). */
    private static void resetDevices(int count) {
        for (int d = 0; d < count; d++) {
            org.bytedeco.cuda.global.cudart.cudaSetDevice(d);
            org.bytedeco.cuda.global.cudart.cudaDeviceReset();
        }
        org.bytedeco.cuda.global.cudart.cudaSetDevice(0);
    }

    private static String firstLine(String s) {
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    /** Classes of org.fsdp4j.cuda from the planted build (then this module's test classes) first; the rest from the parent. */
    private static final class ChildFirst extends URLClassLoader {
        ChildFirst(Path planted, Path testClasses, ClassLoader parent) throws MalformedURLException {
            super(new URL[] {planted.toUri().toURL(), testClasses.toUri().toURL()}, parent);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.startsWith("org.fsdp4j.cuda.")) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    try {
                        c = findClass(name);
                    } catch (ClassNotFoundException e) {
                        c = super.loadClass(name, false);
                    }
                }
                if (resolve) {
                    resolveClass(c);
                }
                return c;
            }
        }
    }
}
