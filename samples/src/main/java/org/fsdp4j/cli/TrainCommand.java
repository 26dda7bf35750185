// `fsdp4j train`: builds the TrainConfig from the flags, prints the resolved configuration,
// one line per step and the gap to the loss floor, and writes summary.json with --out.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.util.concurrent.Callable;
import org.fsdp4j.metrics.JsonFiles;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.TrainSummary;
import org.fsdp4j.train.Trainer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

@Command(name = "train", mixinStandardHelpOptions = true,
        description = "Train a GPT on the embedded Markov data (or --data FILE), one line per step.")
final class TrainCommand implements Callable<Integer> {

    /** Name of the summary file written into --out. */
    static final String SUMMARY_FILE = "summary.json";

    @Spec
    CommandSpec spec;

    @Mixin
    TrainOptions options;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        TrainConfig config = options.applyTo(TrainConfig.builder()).build();
        try (Trainer trainer = new Trainer(config, out::println)) {
            RunLog.header(out, "train", trainer.info());
            TrainSummary summary = trainer.run(r -> RunLog.step(out, r));
            RunLog.footer(out, summary);
            config.outDir().ifPresent(dir -> {
                JsonFiles.writeAtomically(dir.resolve(SUMMARY_FILE), summary);
                out.println("summary: " + dir.resolve(SUMMARY_FILE));
            });
        }
        return 0;
    }
}
