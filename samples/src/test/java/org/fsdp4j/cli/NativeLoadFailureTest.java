// A container with a read-only home and a noexec /tmp cannot unpack JavaCPP's libraries. The run
// must then say how to fix that in one line, not tell a user who asked for the CPU to use the CPU,
// and --device auto must not fall back to a CPU that cannot run (that was a stack trace).
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NativeLoadFailureTest {

    /** Folders no JavaCPP cache can be made in, whoever runs the test (root too). */
    private static final List<String> NO_CACHE = List.of("-Duser.home=/dev/null/home", "-Djava.io.tmpdir=/dev/null/tmp",
            "-Dorg.bytedeco.javacpp.cachedir=/dev/null/cache");

    @TempDir
    Path tmp;

    @Test
    void aCpuRunThatCannotLoadOpenBlasSaysWhereTheLibrariesGo() throws Exception {
        String err = failingRun("--device", "cpu");
        assertTrue(err.startsWith("error: device cpu is not usable: OpenBLAS could not be loaded"), err);
        assertTrue(err.contains("-Dorg.bytedeco.javacpp.cachedir=DIR"), err);
        assertFalse(err.contains("--device cpu"), "the user asked for the CPU already: " + err);
    }

    @Test
    void autoDoesNotFallBackToACpuThatCannotRun() throws Exception {
        String err = failingRun("--device", "auto");
        assertTrue(err.startsWith("error: device auto: no device is usable: cpu: OpenBLAS could not be loaded"), err);
        assertTrue(err.contains("; cuda: "), err);
    }

    private String failingRun(String... device) throws Exception {
        List<String> args = new java.util.ArrayList<>(List.of("train", "--steps", "1"));
        args.addAll(List.of(device));
        ChildJvm child = ChildJvm.start(tmp.resolve("err.txt"), Map.of(), NO_CACHE, args);
        int code = child.exit(60);
        String err = child.stderr().strip();
        assertEquals(1, code, err);
        assertEquals(1, err.lines().count(), "one line: " + err);
        return err;
    }
}
