// Writes the JSON reports (training summaries, benchmark results) that machines read. A file
// is written under a temporary name and renamed, so a reader never sees half a report. It is
// created with the permissions the user's umask gives (0644 under the usual 022), not 0600.
// JSON has no NaN or infinity: a non-finite number is written as null, and the report carries
// a field that says why (e.g. summary.json's diverged_at_step).
package org.fsdp4j.metrics;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.module.SimpleModule;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ThreadLocalRandom;

public final class JsonFiles {

    /** Records' camelCase components become snake_case keys (worldSize → world_size). */
    private static final ObjectMapper MAPPER = new ObjectMapper()
            .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
            .enable(SerializationFeature.INDENT_OUTPUT)
            .registerModule(nonFiniteAsNull());

    private JsonFiles() {
    }

    /** Writes {@code value} as JSON to {@code file}, creating parent directories, atomically. */
    public static void writeAtomically(Path file, Object value) {
        Path target = file.toAbsolutePath();
        try {
            Files.createDirectories(target.getParent());
            // CREATE_NEW with the default attributes: mode 0666 & ~umask (createTempFile would force 0600)
            Path tmp = target.resolveSibling("." + target.getFileName() + "." + Long.toHexString(
                    ThreadLocalRandom.current().nextLong()) + ".tmp");
            try {
                try (OutputStream os = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    MAPPER.writeValue(os, value);
                }
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } finally {
                Files.deleteIfExists(tmp);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + target + ": " + e.getMessage(), e);
        }
    }

    /**
     * Reads {@code file} as {@code type}, with the snake_case keys writeAtomically writes; a file
     * that does not parse or lacks a field throws Jackson's IOException, whose message says where.
     */
    public static <T> T read(Path file, Class<T> type) throws IOException {
        return MAPPER.readValue(file.toFile(), type);
    }

    /** One line of JSON (no indentation), for JSON Lines logs such as metrics.jsonl. */
    public static String toJsonLine(Object value) {
        try {
            return MAPPER.writer().without(SerializationFeature.INDENT_OUTPUT).writeValueAsString(value);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The JSON text of {@code value} as writeAtomically writes it (for tests and logs). */
    public static String toJson(Object value) {
        try {
            return MAPPER.writeValueAsString(value);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** float, double and their arrays: NaN and ±infinity become null (Jackson would write the string "NaN"). */
    private static SimpleModule nonFiniteAsNull() {
        JsonSerializer<Number> number = new JsonSerializer<>() {
            @Override
            public void serialize(Number v, JsonGenerator g, SerializerProvider p) throws IOException {
                writeNumber(g, v.doubleValue(), v instanceof Float);
            }
        };
        JsonSerializer<float[]> floats = new JsonSerializer<>() {
            @Override
            public void serialize(float[] v, JsonGenerator g, SerializerProvider p) throws IOException {
                g.writeStartArray(v, v.length);
                for (float x : v) {
                    writeNumber(g, x, true);
                }
                g.writeEndArray();
            }
        };
        JsonSerializer<double[]> doubles = new JsonSerializer<>() {
            @Override
            public void serialize(double[] v, JsonGenerator g, SerializerProvider p) throws IOException {
                g.writeStartArray(v, v.length);
                for (double x : v) {
                    writeNumber(g, x, false);
                }
                g.writeEndArray();
            }
        };
        SimpleModule m = new SimpleModule("non-finite-as-null");
        m.addSerializer(Float.class, number);
        m.addSerializer(Float.TYPE, number);
        m.addSerializer(Double.class, number);
        m.addSerializer(Double.TYPE, number);
        m.addSerializer(float[].class, floats);
        m.addSerializer(double[].class, doubles);
        return m;
    }

    private static void writeNumber(JsonGenerator g, double v, boolean isFloat) throws IOException {
        if (!Double.isFinite(v)) {
            g.writeNull();
        } else if (isFloat) {
            g.writeNumber((float) v);
        } else {
            g.writeNumber(v);
        }
    }
}
