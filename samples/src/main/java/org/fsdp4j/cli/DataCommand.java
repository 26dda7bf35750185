// `fsdp4j data tokenize --tokenizer T --out DIR FILES...` turns text files into token shards in
// llm.c's layout (train_000000.bin, ..., val_000000.bin, ...), which train --data DIR and llm.c
// read. Files are tokenized in parallel and written in the order given, so the same inputs give
// the same shards. Each file is one document (the tokenizer's end-of-text id first); the last
// --val-fraction of each file, from a line start, goes to the val shards, so both splits sample
// every file and no text is in both.
package org.fsdp4j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;
import org.fsdp4j.backend.Fsdp4jSystemProperties;
import org.fsdp4j.data.DocumentEncoder;
import org.fsdp4j.data.ShardWriter;
import org.fsdp4j.data.TokenShards;
import org.fsdp4j.data.Tokenizer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(name = "data", mixinStandardHelpOptions = true,
        description = "Prepare training data: tokenize text into token shards.",
        subcommands = {DataCommand.Tokenize.class})
final class DataCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing command: use tokenize");
    }

    @Command(name = "tokenize", mixinStandardHelpOptions = true,
            description = {"Tokenize text files into token shards in llm.c's layout (a 256-int32 header, then uint16"
                    + " tokens, or uint32 above 65,536 tokens): DIR/train_000000.bin, ..., DIR/val_000000.bin, ...",
                "Each file is one document, preceded by the tokenizer's end-of-text id; the last --val-fraction of each"
                    + " file (from a line start) goes to the val shards."})
    static final class Tokenize implements Callable<Integer> {

        @Spec
        CommandSpec spec;

        @Option(names = "--tokenizer", required = true, paramLabel = "T",
                description = "a Hugging Face tokenizer.json, or a model folder holding one")
        Path tokenizer;

        @Option(names = "--out", required = true, paramLabel = "DIR", description = "the folder the shards go to (new or empty of shards)")
        Path out;

        @Option(names = "--val-fraction", paramLabel = "F", defaultValue = "0.01",
                description = "the share of each file, its end, that goes to the val shards (0 for none; default ${DEFAULT-VALUE})")
        double valFraction;

        @Option(names = "--shard-tokens", paramLabel = "N", defaultValue = "100000000",
                description = "the most tokens per shard (default ${DEFAULT-VALUE}, as llm.c's)")
        long shardTokens;

        @Option(names = "--threads", paramLabel = "N", description = "files tokenized at once (default: the CPU count)")
        Integer threads;

        @Parameters(paramLabel = "FILES", arity = "1..*", description = "UTF-8 text files, each one document")
        List<Path> files;

        @Override
        public Integer call() {
            PrintWriter pw = spec.commandLine().getOut();
            if (!(valFraction >= 0 && valFraction < 1)) {
                throw new IllegalArgumentException("--val-fraction " + valFraction + " is out of range: give 0 (no val"
                        + " shards) up to, not including, 1");
            }
            int nThreads = threads == null ? Runtime.getRuntime().availableProcessors() : threads;
            if (nThreads < 1) {
                throw new IllegalArgumentException("--threads " + nThreads + " is out of range: give 1 or more");
            }
            long totalBytes = 0;
            for (Path f : files) {
                if (!Files.isRegularFile(f)) {
                    throw new IllegalArgumentException("text file " + f + (Files.exists(f) ? " is not a regular file" : " does not exist")
                            + ": give data tokenize the paths of UTF-8 text files");
                }
                totalBytes += size(f);
            }
            try {
                Files.createDirectories(out);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create --out folder " + out + ": " + e.getMessage(), e);
            }
            for (String split : List.of("train", "val")) {
                if (TokenShards.present(out, split)) {
                    throw new UserError(ExitCode.OUTPUT_IN_USE, "folder " + out + " already holds " + split
                            + "_*.bin token shards: give --out a new folder, or remove them");
                }
            }
            Tokenizer tok = Tokenizer.load(tokenizer);
            long started = System.nanoTime();
            ExecutorService pool = Executors.newFixedThreadPool(nThreads, r -> {
                Thread t = new Thread(r, "tokenize");
                t.setDaemon(true);
                return t;
            });
            ShardWriter train = new ShardWriter(out, "train", tok.vocabSize(), shardTokens);
            ShardWriter val = new ShardWriter(out, "val", tok.vocabSize(), shardTokens);
            ProgressBar bar = bar(totalBytes);
            boolean done = false;
            try {
                // Files in flight at most 2 per thread, written in the order given.
                ArrayDeque<Future<int[][]>> inFlight = new ArrayDeque<>();
                int next = 0;
                while (next < files.size() || !inFlight.isEmpty()) {
                    while (next < files.size() && inFlight.size() < 2 * nThreads) {
                        Path f = files.get(next++);
                        inFlight.add(pool.submit(() -> encodeFile(tok, f, valFraction)));
                    }
                    int[][] parts = take(inFlight.poll());
                    train.write(parts[0]);
                    val.write(parts[1]);
                    if (bar != null) {
                        bar.stepBy(parts[2][0]);
                    }
                }
                train.close();
                val.close();
                done = true;
            } finally {
                pool.shutdownNow();
                if (bar != null) {
                    bar.close();
                }
                if (!done) {        // a failed run leaves no shards: the folder is as it was, and the command can run again
                    train.abort();
                    val.abort();
                }
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            pw.println("tokenizer " + tok.describe() + ", end of text " + (tok.endOfText().isPresent()
                    ? String.valueOf(tok.endOfText().getAsInt()) : "none") + ", " + (train.tokenBytes() == 2
                    ? "uint16" : "uint32") + " tokens");
            pw.println(Format.f("train: %d tokens in %d shards | val: %d tokens in %d shards | %s", train.tokens(),
                    train.shards().size(), val.tokens(), val.shards().size(), out));
            pw.println(Format.f("%d files, %s in %.1f s (%s tokens/s)", files.size(), Format.bytes(totalBytes), seconds,
                    Format.count((train.tokens() + val.tokens()) / Math.max(seconds, 1e-9))));
            pw.flush();
            return ExitCode.OK.code();
        }

        private static long size(Path f) {
            try {
                return Files.size(f);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read text file " + f + ": " + e.getMessage(), e);
            }
        }

        /** A file's train tokens, its val tokens, and its size in bytes (for the progress bar). */
        private static int[][] encodeFile(Tokenizer tok, Path f, double valFraction) {
            byte[] bytes;
            try {
                bytes = Files.readAllBytes(f);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read text file " + f + ": " + e.getMessage(), e);
            } catch (OutOfMemoryError e) {
                throw new IllegalArgumentException("text file " + f + " does not fit in memory: split it into smaller files"
                        + " (or give the JVM more heap, FSDP4J_JAVA_OPTS=-Xmx...)");
            }
            String text;
            try {
                text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString();
            } catch (CharacterCodingException e) {
                throw new IllegalArgumentException("text file " + f + " is not UTF-8 text (" + e.getMessage()
                        + "): convert it to UTF-8, or leave it out");
            }
            int cut = DocumentEncoder.tailStart(text, valFraction);
            int[] train = cut > 0 ? DocumentEncoder.encode(tok, text.substring(0, cut)) : new int[0];
            int[] val = cut < text.length() ? DocumentEncoder.encode(tok, text.substring(cut)) : new int[0];
            return new int[][] {train, val, {bytes.length}};
        }

        private static int[][] take(Future<int[][]> f) {
            try {
                return f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while tokenizing", e);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof RuntimeException r) {
                    throw r;
                }
                throw new IllegalStateException(e.getCause());
            }
        }

        /** A bar over the input's bytes on a terminal; none when the output goes to a file or a pipe. */
        private static ProgressBar bar(long totalBytes) {
            if (System.console() == null || Fsdp4jSystemProperties.plainSteps()) {
                return null;
            }
            return new ProgressBarBuilder().setTaskName("tokenize").setInitialMax(totalBytes)
                    .setStyle(ProgressBarStyle.COLORFUL_UNICODE_BLOCK).setUpdateIntervalMillis(250)
                    .setUnit(" MiB", 1 << 20).showSpeed().setMaxRenderedLength(120).startsFrom(0, Duration.ZERO)
                    .setConsumer(new me.tongfei.progressbar.ConsoleProgressBarConsumer(System.err)).build();
        }
    }
}
