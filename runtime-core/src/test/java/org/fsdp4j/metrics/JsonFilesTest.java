// Reports are valid JSON (a non-finite number is null, never the string "NaN") and are
// created with the permissions the user's umask gives, like any other file the user creates.
package org.fsdp4j.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JsonFilesTest {

    record Report(float loss, double rate, Double optional, float[] losses, double[] times, List<Float> boxed) {
    }

    @TempDir
    Path dir;

    @Test
    void nonFiniteNumbersAreWrittenAsNull() throws IOException {
        Path file = dir.resolve("r.json");
        JsonFiles.writeAtomically(file, new Report(Float.NaN, Double.POSITIVE_INFINITY, Double.NaN,
                new float[] {1.5f, Float.NaN, Float.NEGATIVE_INFINITY}, new double[] {Double.NaN, 2.25},
                List.of(0.5f, Float.NaN)));
        String text = Files.readString(file);
        JsonNode n = new ObjectMapper().readTree(text);    // strict: NaN would not parse
        assertEquals(true, n.get("loss").isNull(), text);
        assertEquals(true, n.get("rate").isNull(), text);
        assertEquals(true, n.get("optional").isNull(), text);
        assertEquals(1.5, n.get("losses").get(0).asDouble());
        assertEquals(true, n.get("losses").get(1).isNull() && n.get("losses").get(2).isNull(), text);
        assertEquals(true, n.get("times").get(0).isNull(), text);
        assertEquals(2.25, n.get("times").get(1).asDouble());
        assertEquals(true, n.get("boxed").get(1).isNull(), text);
    }

    @Test
    void reportsGetTheUmasksPermissionsNotOwnerOnly() throws IOException {
        assumeTrue(FileSystems.getDefault().supportedFileAttributeViews().contains("posix"), "POSIX file modes only");
        Path reference = Files.createFile(dir.resolve("reference"));    // 0666 & ~umask, as the user's files are
        Path report = dir.resolve("report.json");
        JsonFiles.writeAtomically(report, new Report(1f, 2, null, new float[0], new double[0], List.of()));
        assertEquals(Files.getPosixFilePermissions(reference), Files.getPosixFilePermissions(report));
        try (var files = Files.list(dir)) {
            assertEquals(2, files.count(), "no temporary file is left behind");
        }
    }
}
