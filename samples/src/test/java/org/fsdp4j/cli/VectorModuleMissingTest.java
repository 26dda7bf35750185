// A JVM started without --add-modules jdk.incubator.vector (a user's own java command) gets one
// line naming the flag and exit code 1, not a NoClassDefFoundError or a trace.
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class VectorModuleMissingTest {

    @Test
    void trainWithoutTheVectorModuleSaysWhichFlagToAdd(@TempDir Path dir) throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        Path err = dir.resolve("err.txt");
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", Main.class.getName(), "train", "--device", "cpu",
                "--steps", "1").redirectError(err.toFile()).redirectOutput(dir.resolve("out.txt").toFile()).start();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the child JVM did not finish");
        List<String> lines = Files.readAllLines(err);
        assertEquals(ExitCode.BAD_INPUT.code(), p.exitValue(), String.join("\n", lines));
        assertEquals(1, lines.size(), "one line: " + lines);
        assertTrue(lines.get(0).startsWith("error: the CPU backend needs the JDK's Vector API")
                && lines.get(0).contains("--add-modules jdk.incubator.vector"), lines.get(0));
    }
}
