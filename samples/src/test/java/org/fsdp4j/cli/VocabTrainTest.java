// `fsdp4j train` on the CPU at the vocabularies of real models (issue 45 item 5): a tiny GPT at
// GPT-2's 50,257 and a tiny Llama at Llama 2's 32,000, a few steps each, give finite losses that
// fall from about ln V (the random head spreads its mass over every id; the data use a few).
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class VocabTrainTest {

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0} at V = {1}")
    @CsvSource({"gpt, 50257", "llama, 32000"})
    void trainsWithARealVocabulary(String family, int vocab) throws IOException {
        Path out = dir.resolve(family);
        CliRunner.Result r = CliRunner.run("train", "--model", family, "--vocab", String.valueOf(vocab),
                "--layers", "1", "--hidden", "32", "--heads", "2", "--steps", "4", "--batch-size", "2", "--seq-len", "16",
                "--lr", "1e-2", "--device", "cpu", "--cpu-threads", "2", "--out", out.toString());
        assertEquals(0, r.exitCode(), r.out() + r.err());
        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertEquals(4, s.get("losses").size(), s.toString());
        double first = s.get("losses").get(0).asDouble();
        assertTrue(Math.abs(first - Math.log(vocab)) < 1, "a random head starts near ln V = " + Math.log(vocab)
                + ": " + first);
        for (JsonNode l : s.get("losses")) {
            assertTrue(Double.isFinite(l.asDouble()), s.get("losses").toString());
        }
        assertTrue(s.get("final_loss").asDouble() < first - 0.5, "the loss falls: " + s.get("losses"));
    }
}
