// A GPU run on a driver older than the CUDA this fsdp4j was built for, through the real path: the
// stand-in driver reports CUDA 12.4 (FSDP4J_STANDIN_DRIVER_VERSION) and its runtime, as the real
// CUDA 13 runtime does there, answers cudaErrorInsufficientDriver. `--device cuda` stops before
// step 1 with exit 1 and one `error:` line naming both versions and the ways out; `--device auto`
// trains on the CPU, its one fallback line naming the versions. Fake-GPU run only (tag "standin").
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.fsdp4j.cuda.StandIns;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("standin")
class DriverTooOldTest {

    private static final Map<String, String> DRIVER_12_4 = Map.of("FSDP4J_STANDIN_DRIVER_VERSION", "12040");
    /** The CUDA this build is for, as the probe names it ("13.1"), and its forward-compatibility package. */
    private static final int BUILT = org.bytedeco.cuda.global.cudart.CUDART_VERSION;
    private static final String BUILT_FOR = BUILT / 1000 + "." + BUILT % 1000 / 10;
    private static final String COMPAT = "cuda-compat-" + BUILT / 1000 + "-" + BUILT % 1000 / 10;

    @TempDir
    Path dir;

    /** The JVM flags that make a child JVM load the stand-ins, as this test JVM does. */
    private static List<String> standInJvm() {
        List<String> jvm = new ArrayList<>();
        for (String p : List.of("org.bytedeco.javacpp.platform.linkpath", "org.bytedeco.javacpp.cachedir",
                StandIns.PROPERTY)) {
            jvm.add("-D" + p + "=" + System.getProperty(p));
        }
        return jvm;
    }

    private ChildJvm train(String name, String device) throws IOException {
        return ChildJvm.start(dir.resolve(name + ".err"), DRIVER_12_4, standInJvm(), List.of("train", "--device", device,
                "--steps", "1", "--batch-size", "2", "--seq-len", "16", "--out", dir.resolve(name).toString()));
    }

    @Test
    void cudaStopsWithOneLineNamingBothVersionsAndTheWaysOut() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm run = train("cuda", "cuda");
        int code = run.exit(120);
        String err = run.stderr();
        assertEquals(1, code, err);
        List<String> errors = err.lines().filter(l -> l.startsWith("error: ")).toList();
        assertEquals(1, errors.size(), err);
        String line = errors.get(0);
        System.out.println("driver 12.4, --device cuda: " + line);
        assertTrue(line.startsWith("error: device cuda is not usable: the NVIDIA driver supports CUDA 12.4 but this"
                + " fsdp4j was built for CUDA " + BUILT_FOR + ": "), line);
        assertTrue(line.contains("forward-compatibility package " + COMPAT), line);
        assertTrue(line.contains("R580 or newer"), line);
        assertTrue(line.endsWith("; use --device cpu or --device auto"), line);
        assertEquals(1, line.split("LD_LIBRARY_PATH", -1).length - 1, "each way out once: " + line);
        assertFalse(err.contains("\tat ") || err.contains("Exception"), "no stack trace:\n" + err);
        assertFalse(err.contains("step 1/"), err);
    }

    @Test
    void autoFallsBackToTheCpuNamingTheVersions() throws Exception {
        StandIns.assumeStandIns();
        ChildJvm run = train("auto", "auto");
        int code = run.exit(300);
        String err = run.stderr();
        assertEquals(0, code, err);
        List<String> out = new ArrayList<>();
        for (String l = run.lines().poll(5, TimeUnit.SECONDS); l != null; l = run.lines().poll(2, TimeUnit.SECONDS)) {
            out.add(l);   // the reader thread drains the ended child's stdout
        }
        List<String> fallback = out.stream().filter(l -> l.startsWith("device auto: using cpu (")).toList();
        assertEquals(1, fallback.size(), String.join("\n", out));
        String line = fallback.get(0);
        System.out.println("driver 12.4, --device auto: " + line);
        assertTrue(line.contains("the NVIDIA driver supports CUDA 12.4 but this fsdp4j was built for CUDA " + BUILT_FOR),
                line);
        assertTrue(line.contains(COMPAT), line);
        assertFalse(err.contains("error: "), err);
        assertFalse(err.contains("\tat ") || err.contains("Exception"), "no stack trace:\n" + err);
    }
}
