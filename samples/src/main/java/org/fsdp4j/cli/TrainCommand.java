// `fsdp4j train`: builds the TrainConfig from the flags and checks everything it can before the
// first step (the --out directory is created, probed and locked; the data is read; the
// preflight estimates the peak memory against what the device has and the time per step), then
// prints the resolved configuration, one line per step and the gap to the loss floor, and
// writes summary.json with --out. A run that diverges or is interrupted still writes its
// summary; it then exits with the code ExitCode gives it.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.tensor.Device;
import org.fsdp4j.train.AnalyticStepCost;
import org.fsdp4j.train.NonFinitePolicy;
import org.fsdp4j.train.Preflight;
import org.fsdp4j.train.RunOutcome;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.TrainSummary;
import org.fsdp4j.train.Trainer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(name = "train", mixinStandardHelpOptions = true,
        description = "Train a GPT (or, with --model llama, a Llama) on the embedded Markov data (or --data FILE), one line per step.")
final class TrainCommand implements Callable<Integer> {

    /** Name of the summary file written into --out. */
    static final String SUMMARY_FILE = "summary.json";

    @Spec
    CommandSpec spec;

    @Mixin
    TrainOptions options;

    @Option(names = "--force", description = "run even when the preflight estimates more memory than is available")
    boolean force;

    @Option(names = "--memory-limit", paramLabel = "SIZE", converter = ByteSize.class,
            description = "memory the preflight may plan for, e.g. 12GiB (default: what the device has available)")
    Long memoryLimit;

    static final class ByteSize implements picocli.CommandLine.ITypeConverter<Long> {
        @Override
        public Long convert(String value) {
            try {
                return Format.parseBytes(value);
            } catch (IllegalArgumentException e) {
                throw new picocli.CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        TrainConfig asked = options.applyTo(TrainConfig.builder()).build();
        try (OutputDir dir = OutputDir.claim(asked.outDir(), "train", SUMMARY_FILE)) {
            Device device = Backends.resolve(asked.device(), out::println);
            TrainConfig config = asked.toBuilder().device(device.toString()).build();
            Preflight.Report preflight = Preflight.check(config, device, new AnalyticStepCost(),
                    memoryLimit == null ? OptionalLong.empty() : OptionalLong.of(memoryLimit), true);
            refuseUnlessItFits(preflight);
            dir.removeEarlierReports();
            try (Trainer trainer = new Trainer(config, out::println);
                 SignalStop stop = SignalStop.install(trainer, why -> abandon(trainer, dir, why))) {
                RunLog.header(out, "train", trainer.info());
                RunLog.preflight(out, preflight, config.steps(), force);
                boolean lossScaled = config.precision().needsLossScaling();
                TrainSummary summary;
                try {
                    summary = trainer.run(r -> RunLog.step(out, r, lossScaled));
                } catch (RuntimeException | OutOfMemoryError e) {
                    if (!stop.claimEnding()) {
                        waitForHalt();          // a signal's watchdog is writing the summary already
                    }
                    throw withSummary(e, trainer, dir);
                }
                if (!stop.claimEnding()) {
                    waitForHalt();              // a signal abandoned the run and is writing its summary
                }
                RunLog.footer(out, summary);
                Optional<Path> file = dir.write(SUMMARY_FILE, summary);
                file.ifPresent(f -> out.println("summary: " + f));
                out.flush();
                return ending(config, summary, file, stop);
            }
        }
    }

    /** The exit code of a run that got to its end; divergence is a UserError, an interruption one line. */
    private int ending(TrainConfig config, TrainSummary summary, Optional<Path> file, SignalStop stop) {
        RunOutcome outcome = summary.outcome();
        String where = file.map(f -> "; summary: " + f).orElse("");
        if (outcome.diverged()) {
            throw new UserError(ExitCode.DIVERGED, divergence(config, outcome) + where);
        }
        if (outcome.interrupted()) {
            spec.commandLine().getErr().println("interrupted by " + outcome.interruptedBy() + " after step "
                    + summary.steps() + " of " + outcome.plannedSteps() + where);
            spec.commandLine().getErr().flush();
            return stop.exitCode().code();
        }
        return ExitCode.OK.code();
    }

    /** What happened at the diverged step and what to try. */
    static String divergence(TrainConfig c, RunOutcome o) {
        String what = switch (o.divergence()) {
            case "nonfinite_loss" -> "the loss is not finite (inf or NaN)";
            case "nonfinite_gradients" -> "the gradients are not finite (inf or NaN) although the loss is";
            case "loss_scale_floor" -> "the fp16 gradients overflowed at every loss scale down to the scaler's floor";
            default -> o.divergence();
        };
        String skipped = c.onNonFinite().action() == NonFinitePolicy.Action.SKIP
                ? " after skipping " + c.onNonFinite().maxSkippedSteps() + " such steps" : "";
        return "training diverged at step " + o.divergedAtStep() + " of " + o.plannedSteps() + ": " + what + skipped
                + "; the last update was not applied. Try a lower --lr (now " + Format.lr(c.lr()) + ")"
                + (c.maxGradNorm() > 0 ? "" : ", --max-grad-norm 1")
                + (c.precision().needsLossScaling() ? ", or bf16 instead of fp16" : "")
                + (c.onNonFinite().action() == NonFinitePolicy.Action.STOP
                        ? ", or --on-nonfinite skip for rare bad batches" : "");
    }

    /** Refuses a run the preflight says will not fit, with the figures and the flags that would fit. */
    private void refuseUnlessItFits(Preflight.Report p) {
        String fixes = p.fixes().isEmpty() ? ""
                : ": it fits with " + p.fixes().stream()
                        .map(f -> f.flags() + " (≈ " + Format.bytes(f.neededBytes()) + ")")
                        .collect(Collectors.joining(", or "));
        String need = "the run needs ≈ " + Format.bytes(p.neededBytes()) + " of " + p.memoryKind() + " at its peak ("
                + (p.sharingRanks() > 1 ? p.sharingRanks() + " ranks × " + Format.bytes(p.cost().peakBytesPerRank()) + ": "
                        : "") + Format.bytes(p.cost().persistentBytesPerRank()) + " state, "
                + Format.bytes(p.cost().activationBytesPerRank()) + " activations"
                + (p.cost().temporaryBytesPerRank() > 0 ? ", " + Format.bytes(p.cost().temporaryBytesPerRank())
                        + " unit buffers" : "") + (p.sharingRanks() > 1 ? " per rank)" : ")")
                + p.availableBytes().stream().mapToObj(a -> ", " + Format.bytes(a) + " is available").findFirst().orElse("");
        if (p.bufferTooLarge()) {
            // not even --force helps: the backend cannot allocate it
            throw new UserError(ExitCode.OUT_OF_MEMORY, "one buffer of the step needs "
                    + Format.bytes(p.cost().largestBufferBytes()) + " but a CPU tensor holds at most "
                    + Format.bytes(p.bufferLimitBytes()) + "; " + need
                    + (fixes.isEmpty() ? ": lower --batch-size or --seq-len" : fixes));
        }
        if (!p.fitsMemory() && !force) {
            throw new UserError(ExitCode.OUT_OF_MEMORY, need
                    + (fixes.isEmpty() ? ": no smaller batch, no checkpointing and no micro-batching fits;"
                            + " use a smaller preset or a machine with more memory" : fixes)
                    + "; --force runs it anyway");
        }
    }

    /**
     * A step failed: the summary of the steps before it is written, and a user-facing failure
     * says where it is (a bug keeps its own exception and trace).
     */
    private static RuntimeException withSummary(Throwable e, Trainer trainer, OutputDir dir) {
        String where;
        try {
            where = dir.write(SUMMARY_FILE, trainer.summary()).map(f -> "; summary of the steps before: " + f).orElse("");
        } catch (RuntimeException writeFailed) {
            e.addSuppressed(writeFailed);
            where = "";
        }
        UserError u = ErrorHandler.classify(e);
        if (u != null) {
            return new UserError(u.exitCode(), u.getMessage() + where, e);
        }
        return e instanceof RuntimeException r ? r : new IllegalStateException(e);
    }

    /** From the signal watchdog, mid-step: the summary of the completed steps, and one line. */
    private void abandon(Trainer trainer, OutputDir dir, String why) {
        TrainSummary summary = trainer.summary();
        String where;
        try {
            where = dir.write(SUMMARY_FILE, summary).map(f -> "; summary: " + f).orElse("");
        } catch (RuntimeException e) {
            where = "; the summary could not be written: " + e.getMessage();
        }
        spec.commandLine().getErr().println("interrupted by " + summary.outcome().interruptedBy() + " during step "
                + (summary.steps() + 1) + " of " + summary.outcome().plannedSteps() + " (abandoned: " + why + ")" + where);
        spec.commandLine().getErr().flush();
    }

    private static void waitForHalt() {
        while (true) {
            try {
                Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException e) {
                // the JVM is halting
            }
        }
    }
}
