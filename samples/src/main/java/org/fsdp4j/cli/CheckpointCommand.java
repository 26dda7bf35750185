// `fsdp4j checkpoint inspect DIR` prints what a checkpoint holds and verifies every file's size and
// checksum; `fsdp4j checkpoint export DIR --to model.safetensors` writes one consolidated
// safetensors file in Hugging Face GPT-2's layout (fp32, bf16 or fp16). DIR is a checkpoint
// (DIR/step-NNNNNNNN) or a --save-dir, whose latest complete checkpoint is taken. A bad checkpoint
// is one line naming the file and the problem, exit code 9.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.Callable;
import org.fsdp4j.api.DType;
import org.fsdp4j.checkpoint.CheckpointIndex;
import org.fsdp4j.checkpoint.CheckpointReader;
import org.fsdp4j.checkpoint.Checkpointer;
import org.fsdp4j.checkpoint.SafetensorsExport;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(name = "checkpoint", mixinStandardHelpOptions = true,
        description = "Inspect or export a checkpoint written by train --save-dir.",
        subcommands = {CheckpointCommand.Inspect.class, CheckpointCommand.Export.class})
final class CheckpointCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new picocli.CommandLine.ParameterException(spec.commandLine(), "missing command: use inspect or export");
    }

    /** The checkpoint {@code dir} names, opened and verified; partial saves beside it are named on {@code out}. */
    static CheckpointReader open(Path dir, PrintWriter out) {
        if (dir.toString().isEmpty()) {         // '' would mean the current directory
            throw new IllegalArgumentException("DIR is empty: give a checkpoint directory or a --save-dir");
        }
        return CheckpointReader.open(Checkpointer.resolve(dir.toString(), Optional.empty(), out::println));
    }

    @Command(name = "inspect", mixinStandardHelpOptions = true,
            description = "Print what a checkpoint holds and verify its files' sizes and checksums.")
    static final class Inspect implements Callable<Integer> {

        @Spec
        CommandSpec spec;

        @Parameters(paramLabel = "DIR", description = "a checkpoint directory, or a --save-dir (its latest checkpoint)")
        Path dir;

        @Override
        public Integer call() {
            PrintWriter out = spec.commandLine().getOut();
            try (CheckpointReader r = open(dir, out)) {
                CheckpointIndex x = r.index();
                out.println("checkpoint " + r.dir() + " (format " + x.format() + " v" + x.formatVersion() + ")");
                out.println(Format.f("  step %d of %d | next batch: step %d (seed %d, batch %d x %d)%s", x.step(),
                        x.data().plannedSteps(), x.data().nextStep(), x.data().seed(), x.data().batchSize(), x.data().seqLen(),
                        x.data().tokenPosition() == null ? "" : ", at token " + x.data().tokenPosition() + " of the stream"));
                out.println("  model " + x.preset() + ": " + x.model());
                long params = x.params().stream().mapToLong(CheckpointIndex.Param::numel).sum();
                out.println(Format.f("  %d parameters in %d tensors | buffers %s, %s", params, x.params().size(),
                        String.join(", ", x.buffers()), x.stateDtype()));
                out.println(Format.f("  saved by %d ranks, %s (shard groups of %d), params %s, reduce %s", x.worldSize(),
                        x.strategy(), x.shardSize(), x.paramDtype(), x.reduceDtype()));
                out.println(Format.f("  optimizer %s: step %d, lr %s, betas (%s, %s), eps %s, weight decay %s | loss scale %s",
                        x.optimizer().name(), x.optimizer().step(), Format.lr(x.optimizer().lr()), x.optimizer().beta1(),
                        x.optimizer().beta2(), x.optimizer().eps(), x.optimizer().weightDecay(), x.lossScaler().scale()));
                if (x.losses() != null && x.losses().length > 0) {
                    out.println(Format.f("  last loss %.4f (step %d)", x.losses()[x.losses().length - 1], x.losses().length));
                }
                for (CheckpointIndex.RankFile f : x.files()) {
                    out.println(Format.f("  %s  rank %d, shard %d  %s  crc32c %s  ok", f.file(), f.rank(), f.shardIndex(),
                            Format.bytes(f.bytes()), f.crc32c()));
                }
                out.println("verified: " + x.files().size() + " files, sizes and checksums match the index");
                out.flush();
            }
            return ExitCode.OK.code();
        }
    }

    @Command(name = "export", mixinStandardHelpOptions = true,
            description = "Write the checkpoint's parameters as one safetensors file in Hugging Face GPT-2's layout.")
    static final class Export implements Callable<Integer> {

        @Spec
        CommandSpec spec;

        @Parameters(paramLabel = "DIR", description = "a checkpoint directory, or a --save-dir (its latest checkpoint)")
        Path dir;

        @Option(names = "--to", paramLabel = "FILE", required = true, description = "the safetensors file to write")
        Path to;

        @Option(names = "--dtype", paramLabel = "fp32|bf16|fp16", description = "dtype of the exported weights, bf16 and fp16"
                + " rounded to nearest even (default: fp32)")
        String dtype = "fp32";

        @Override
        public Integer call() {
            PrintWriter out = spec.commandLine().getOut();
            if (to.toString().isEmpty()) {
                throw new IllegalArgumentException("--to is empty: give the safetensors file to write");
            }
            DType d = DType.parseFloating(dtype);
            try (CheckpointReader r = open(dir, out)) {
                SafetensorsExport.Exported e = SafetensorsExport.write(r, to, d);
                out.println(Format.f("exported step %d of %s: %d tensors, %s, %s -> %s", r.index().step(), r.dir(),
                        e.tensors(), d.shortName(), Format.bytes(e.bytes()), e.file()));
                out.flush();
            }
            return ExitCode.OK.code();
        }
    }
}
