// `fsdp4j generate --from CKPT|WEIGHTS --prompt "..."`: text from a trained model on one device, how
// a user sees that training worked. The weights come whole onto the device (FullWeights) from a
// checkpoint written by train --save-dir (a step directory, a save directory's latest, or
// SAVE_DIR/latest, as train --resume resolves them; the model's shape is the checkpoint's) or from
// pretrained safetensors (a file or a Hugging Face model directory, in the family's layout, as
// train --init-from reads them; the shape from --model-config, the directory's config.json, or
// --preset and the shape flags). The prompt runs through the model once, then each new token goes
// through the KV cache (Generation): greedy at --temperature 0, else drawn with --top-k from a
// --seed, so the same command prints the same text. The prompt and the text are printed as they
// come, then one summary line (tokens, tokens/s, what stopped it). Text is the byte-level
// vocabulary's; --token-ids takes and prints token ids instead, for a model without a tokenizer.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.ParamSource;
import org.fsdp4j.api.ShardedStateDict;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.checkpoint.CheckpointReader;
import org.fsdp4j.checkpoint.Checkpointer;
import org.fsdp4j.data.Tokenizer;
import org.fsdp4j.model.DecoderModel;
import org.fsdp4j.model.FullWeights;
import org.fsdp4j.model.Generation;
import org.fsdp4j.model.ModelConfig;
import org.fsdp4j.model.Sampler;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.weights.PretrainedWeights;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "generate", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Generate text from a checkpoint or pretrained weights on one device, with a KV cache.")
final class GenerateCommand implements Callable<Integer> {

    static final int DEFAULT_MAX_NEW_TOKENS = 100;

    @Spec
    CommandSpec spec;

    @Option(names = "--from", paramLabel = "CKPT|WEIGHTS", required = true,
            description = "a checkpoint of train --save-dir (its step-NNNNNNNN directory, the save directory for its"
                    + " latest, or SAVE_DIR/latest), or pretrained weights: a .safetensors file or a Hugging Face model"
                    + " directory (model.safetensors, or model.safetensors.index.json and its files)")
    String from;

    @Option(names = "--prompt", paramLabel = "TEXT", required = true,
            description = "the text to continue (with --token-ids: token ids separated by spaces or commas)")
    String prompt;

    @Option(names = "--max-new-tokens", paramLabel = "N",
            description = "tokens to generate at most; fewer when the context fills (default: " + DEFAULT_MAX_NEW_TOKENS + ")")
    int maxNewTokens = DEFAULT_MAX_NEW_TOKENS;

    @Option(names = "--temperature", paramLabel = "T",
            description = "0: greedy (the most likely token each time); else sample from softmax(logits / T) (default: 1.0)")
    double temperature = 1.0;

    @Option(names = "--top-k", paramLabel = "K", description = "sample among the K most likely tokens; 0: all (default: 0)")
    int topK;

    @Option(names = "--seed", paramLabel = "S", description = "seed of the sampling: the same seed gives the same text (default: 1)")
    long seed = 1;

    @Option(names = "--device", paramLabel = "auto|cpu|cuda[:i]",
            description = "the one device to generate on; auto takes a usable GPU, else the CPU (default: auto)")
    String device = "auto";

    @Option(names = "--token-ids", description = "--prompt is token ids, and the output is printed as token ids (a model"
            + " whose vocabulary is not the byte-level one)")
    boolean tokenIds;

    @Option(names = "--tokenizer", paramLabel = "T",
            description = "a Hugging Face tokenizer.json (or its folder), the one the model was trained with (default:"
                    + " bytes, the vocabulary of the built-in corpus and of --data FILE)")
    Path tokenizerFile;

    @Option(names = "--preset", paramLabel = "NAME", completionCandidates = TrainOptions.PresetNames.class,
            description = "pretrained weights only: the family's preset the shape flags override (default: "
                    + TrainConfig.Builder.DEFAULT_PRESET + ")")
    String preset;

    @Mixin
    ModelOptions model = new ModelOptions();

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        if (from.isEmpty()) {
            throw new IllegalArgumentException("--from is empty: give a checkpoint directory or a .safetensors file");
        }
        if (maxNewTokens < 0) {
            throw new IllegalArgumentException("--max-new-tokens must be 0 or more, got " + maxNewTokens);
        }
        Sampler sampler = new Sampler(temperature, topK, seed);      // refuses a negative --temperature or --top-k
        if (tokenIds && tokenizerFile != null) {
            throw new IllegalArgumentException("--token-ids and --tokenizer both say how the prompt is read: give one");
        }
        Tokenizer tokenizer = tokenizerFile == null ? Tokenizer.bytes() : Tokenizer.load(tokenizerFile);
        Device dev = Backends.resolve(device, out::println);
        try (Source source = open(out);
             Backend backend = Backends.create(dev, new MemoryTracker("generate"), 0);
             DecoderModel<?> m = source.config.create(backend, false)) {
            ModelConfig config = source.config;
            int[] promptIds = tokenIds ? parseIds(prompt) : tokenizer.encode(prompt);
            int drawn = config.vocabSize();
            if (!tokenIds) {
                if (tokenizer.vocabSize() > config.vocabSize()) {
                    throw new IllegalArgumentException("the model's vocabulary has " + config.vocabSize() + " tokens, fewer"
                            + " than the prompt's tokenizer, " + tokenizer.describe() + ": give --token-ids and"
                            + " the prompt as token ids, or a model trained on that vocabulary");
                }
                drawn = tokenizer.vocabSize();      // a model padding its vocabulary past the tokenizer's draws none of the padding
            }
            checkPrompt(promptIds, config);
            try (FullWeights w = FullWeights.bind(m, source.weights, DType.F32)) {
                out.println(Format.f("generate: %s, %s %s, on %s | %s", config.family(), config.describe(), source.what,
                        dev, sampler.greedy() ? "greedy" : Format.f("temperature %s, top-k %s, seed %d", temperature,
                                topK == 0 ? "off" : String.valueOf(topK), seed)));
                out.print(tokenIds ? join(promptIds) : prompt);
                out.flush();
                Printer printer = new Printer(out, tokenizer);
                long start = System.nanoTime();
                Generation.Result r = Generation.run(m, promptIds, maxNewTokens, sampler, drawn, printer::accept);
                double seconds = (System.nanoTime() - start) / 1e9;
                printer.finish();
                out.println();
                int n = r.tokens().length;
                out.println(Format.f("generated %d tokens after a prompt of %d in %.2f s (%.1f tokens/s) | stopped: %s", n,
                        promptIds.length, seconds, n / Math.max(seconds, 1e-9),
                        r.stop() == Generation.Stop.MAX_NEW_TOKENS ? "--max-new-tokens " + maxNewTokens + " reached"
                                : "the context of " + config.maxSeqLen() + " tokens is full"));
                out.flush();
            }
        }
        return ExitCode.OK.code();
    }

    /** Where the weights come from, their model's shape, and how the header names them. */
    private record Source(ModelConfig config, ParamSource weights, String what, AutoCloseable owner)
            implements AutoCloseable {
        @Override
        public void close() {
            try {
                owner.close();
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** --from as pretrained safetensors weights, or a checkpoint (resolved as train --resume resolves one). */
    private Source open(PrintWriter out) {
        Path p = Path.of(from);
        boolean pretrained = Files.isRegularFile(p) ? from.endsWith(".safetensors")
                : Files.isRegularFile(p.resolve("model.safetensors")) || Files.isRegularFile(p.resolve("model.safetensors.index.json"));
        if (pretrained) {
            model.refusePresetWithConfig(preset);
            if (model.modelConfig == null && !model.given() && Files.isRegularFile(p.resolve("config.json"))) {
                model.modelConfig = p.resolve("config.json");      // a Hugging Face model directory says its shape
            }
            ModelConfig config = model.resolve(preset != null ? preset : TrainConfig.Builder.DEFAULT_PRESET);
            PretrainedWeights w = config.openWeights(p);
            return new Source(config, w, "from pretrained weights " + p, w);
        }
        if (model.given() || model.family != null || preset != null) {
            throw new IllegalArgumentException("--from " + from + " is a checkpoint, which gives the model's family and"
                    + " shape: drop --model, --preset and the shape flags");
        }
        Path dir;
        if (!Files.exists(p) && p.getFileName() != null && p.getFileName().toString().equals("latest")) {
            Path saveDir = p.toAbsolutePath().getParent();
            dir = Checkpointer.resolve("latest", Optional.of(saveDir), out::println);
        } else {
            dir = Checkpointer.resolve(from, Optional.empty(), out::println);
        }
        CheckpointReader reader = CheckpointReader.open(dir);
        try {
            ModelConfig config = reader.index().model().toModelConfig();
            ParamSource weights = (s, first, values, offset, count) ->
                    reader.read(s.name(), ShardedStateDict.PARAM, first, values, offset, count);
            return new Source(config, weights, "from checkpoint " + reader.dir() + " (step " + reader.index().step() + ")",
                    reader);
        } catch (RuntimeException e) {
            reader.close();
            throw e;
        }
    }

    private void checkPrompt(int[] ids, ModelConfig config) {
        if (ids.length == 0) {
            throw new IllegalArgumentException("--prompt is empty: give at least one " + (tokenIds ? "token id" : "character"));
        }
        if (ids.length > config.maxSeqLen()) {
            throw new IllegalArgumentException("--prompt is " + ids.length + " tokens, longer than the model's context of "
                    + config.maxSeqLen() + ": shorten it");
        }
        for (int id : ids) {
            if (id < 0 || id >= config.vocabSize()) {
                throw new IllegalArgumentException("--prompt token " + id + " is outside the model's vocabulary (0.."
                        + (config.vocabSize() - 1) + ")");
            }
        }
    }

    private static int[] parseIds(String text) {
        List<Integer> ids = new ArrayList<>();
        for (String s : text.trim().split("[\\s,]+")) {
            if (s.isEmpty()) {
                continue;
            }
            try {
                ids.add(Integer.parseInt(s));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--prompt with --token-ids takes token ids separated by spaces or"
                        + " commas, not '" + s + "'");
            }
        }
        return ids.stream().mapToInt(Integer::intValue).toArray();
    }

    private static String join(int[] ids) {
        StringBuilder b = new StringBuilder();
        for (int id : ids) {
            b.append(b.length() == 0 ? "" : " ").append(id);
        }
        return b.toString();
    }

    /**
     * Prints generated tokens as they come: ids one by one (--token-ids), or text, decoded from every
     * token so far and printed up to its last complete character (a byte-level token may end partway
     * through one), the rest once generation ends.
     */
    private final class Printer {
        private final PrintWriter out;
        private final Tokenizer tokenizer;
        private final List<Integer> tokens = new ArrayList<>();
        private int printed;                    // characters of the decoded text already printed

        Printer(PrintWriter out, Tokenizer tokenizer) {
            this.out = out;
            this.tokenizer = tokenizer;
        }

        void accept(int token) {
            tokens.add(token);
            if (tokenIds) {
                out.print(" " + token);
            } else {
                String text = tokenizer.decode(tokens.stream().mapToInt(Integer::intValue).toArray());
                int end = text.length();
                while (end > printed && text.charAt(end - 1) == '\uFFFD') {
                    end--;                      // an incomplete character: wait for its next bytes
                }
                out.print(text.substring(printed, end));
                printed = end;
            }
            out.flush();
        }

        void finish() {
            if (!tokenIds) {
                String text = tokenizer.decode(tokens.stream().mapToInt(Integer::intValue).toArray());
                out.print(text.substring(Math.min(printed, text.length())));
            }
        }
    }
}
