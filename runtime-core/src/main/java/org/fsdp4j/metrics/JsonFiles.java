// Writes the JSON reports (training summaries, benchmark results) that machines read. A file
// is written under a temporary name and renamed, so a reader never sees half a report.
package org.fsdp4j.metrics;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

public final class JsonFiles {

    /** Records' camelCase components become snake_case keys (worldSize → world_size). */
    private static final ObjectMapper MAPPER = new ObjectMapper()
            .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
            .enable(SerializationFeature.INDENT_OUTPUT);

    private JsonFiles() {
    }

    /** Writes {@code value} as JSON to {@code file}, creating parent directories, atomically. */
    public static void writeAtomically(Path file, Object value) {
        Path target = file.toAbsolutePath();
        try {
            Files.createDirectories(target.getParent());
            Path tmp = Files.createTempFile(target.getParent(), target.getFileName().toString(), ".tmp");
            try {
                MAPPER.writeValue(tmp.toFile(), value);
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } finally {
                Files.deleteIfExists(tmp);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + target + ": " + e.getMessage(), e);
        }
    }
}
