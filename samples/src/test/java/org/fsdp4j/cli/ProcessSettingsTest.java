// The settings the processes of a run compare before training (a mismatch is one line listing each
// key that differs, exit 11) are keyed by the flags a user types and hold values as they are typed:
// "--min-lr: 1e-4 (process 0), ...", not TrainConfig's field names and Float.toString's digits
// ("minLr: 1.00000005E-4", "model.embedDim").
package org.fsdp4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Optional;
import org.fsdp4j.model.GptConfig;
import org.fsdp4j.model.LlamaConfig;
import org.fsdp4j.train.CheckpointOptions;
import org.fsdp4j.train.TrainConfig;
import org.junit.jupiter.api.Test;

class ProcessSettingsTest {

    private static final CheckpointOptions NO_CHECKPOINTS = new CheckpointOptions(0, Optional.empty(), 1, Optional.empty());

    @Test
    void theSettingsAreTheFlagsWithTheirValuesAsTyped() {
        TrainConfig gpt = TrainConfig.builder().preset("custom").model(new GptConfig(256, 64, 2, 2, 64)).steps(10)
                .fsdp(f -> f.lr(1e-3f).device("cpu")).build();       // --min-lr defaults to lr / 10, in float 1.00000005E-4
        Map<String, String> s = TrainCommand.settings(gpt, NO_CHECKPOINTS);
        assertEquals("1e-4", s.get("--min-lr"), s.toString());
        assertEquals("0.001", s.get("--lr"), s.toString());
        assertEquals("64", s.get("--hidden"), s.toString());
        assertEquals("2", s.get("--heads"), s.toString());
        assertEquals("2", s.get("--layers"), s.toString());
        assertEquals("10", s.get("--steps"), s.toString());
        for (Map.Entry<String, String> e : s.entrySet()) {
            assertTrue(e.getKey().startsWith("--"), "not a flag: " + e);
            assertFalse(e.getValue().matches(".*\\d\\.\\d*E-?\\d.*"), "Java's float digits: " + e);
        }
        // a Llama's sizes that no flag sets keep config.json's names (a preset or --model-config gives them)
        Map<String, String> llama = TrainCommand.settings(TrainConfig.builder().preset("tiny")
                .model(LlamaConfig.preset("tiny")).fsdp(f -> f.device("cpu")).build(), NO_CHECKPOINTS);
        assertEquals("llama", llama.get("--model"), llama.toString());
        assertEquals("2", llama.get("num_key_value_heads"), llama.toString());
        assertEquals("1e-5", llama.get("rms_norm_eps"), llama.toString());
        assertEquals("10000", llama.get("rope_theta"), llama.toString());
        assertFalse(llama.keySet().stream().anyMatch(k -> k.startsWith("model.")), llama.toString());
    }
}
