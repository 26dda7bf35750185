// `fsdp4j train`: builds the TrainConfig from the flags and checks everything it can before the
// first step (the --out and --save-dir directories are created, probed and locked, once the
// processes of a run of several have met; the data is read; the preflight estimates the peak
// memory against what the device has and the time per step), then
// prints the resolved configuration, one line per step and the gap to the loss floor, and
// writes summary.json with --out. A run that diverges or is interrupted still writes its
// summary; it then exits with the code ExitCode gives it. With --save-dir it saves checkpoints
// (every --save-every K steps, and when SIGTERM stops it: then it exits 0, since --resume latest
// continues the run); --resume starts from one. After step 1 it prints the planner's prediction
// beside the measured memory. On a terminal the steps show as a progress bar with ETA; with --out
// it also writes metrics.jsonl (one line per step) and, at the end, loss.png and memory.png.
// As one process of several (DistOptions: flags, or torchrun's, Slurm's or Open MPI's variables)
// it first meets the others and checks their settings are its own; its ranks talk over TCP on the
// CPU and over NCCL on GPUs; process 0 prints and writes for the run, and a failure here is left
// for the others to read, so that every process stops at once with the same reason. Checkpoints
// then work as in one process, with --save-dir a directory every process sees: each process saves
// its own ranks there and process 0 commits the checkpoint.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.fsdp4j.api.Device;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import org.fsdp4j.dist.Settings;
import org.fsdp4j.train.CheckpointOptions;
import org.fsdp4j.train.NonFinitePolicy;
import org.fsdp4j.train.Preflight;
import org.fsdp4j.train.StepCostModel;
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

    @Option(names = "--save-every", paramLabel = "K",
            description = "save a checkpoint every K steps into --save-dir (default: only when SIGTERM stops the run)")
    int saveEvery;

    @Option(names = "--save-dir", paramLabel = "DIR",
            description = "where checkpoints go (DIR/step-NNNNNNNN); SIGTERM then saves one and exits 0; checked and"
                    + " locked before the first step")
    Path saveDir;

    @Option(names = "--keep", paramLabel = "K", description = "with --save-dir: complete checkpoints kept there (default: "
            + CheckpointOptions.DEFAULT_KEEP + ")")
    Integer keep;

    @Option(names = "--resume", paramLabel = "DIR|latest",
            description = "continue from a checkpoint directory, or the newest one under --save-dir; any world size "
                    + "and strategy (the shards are re-sliced)")
    String resume;

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

    @Mixin
    DistOptions dist;

    @Override
    public Integer call() {
        Optional<ProcessIdentity> identity = dist.identity();           // empty: this process runs alone
        boolean first = identity.map(id -> id.rank() == 0).orElse(true);
        PrintWriter out = first ? spec.commandLine().getOut() : DistOptions.quiet();   // process 0 speaks for the run
        TrainConfig.Builder builder = options.applyTo(TrainConfig.builder());
        if (identity.isPresent() && options.worldSize == null) {
            builder.fsdp(f -> f.worldSize(identity.get().count()));                  // one rank per process
        }
        if (!first) {
            builder.outDir(null);                                       // process 0 writes the run's reports
        }
        TrainConfig asked = builder.build();
        OutputDir.refuseEmpty(Optional.ofNullable(saveDir), "--save-dir");
        if (keep != null && saveDir == null) {
            throw new IllegalArgumentException("--keep applies with --save-dir only (how many checkpoints it keeps there)");
        }
        CheckpointOptions checkpoints = new CheckpointOptions(saveEvery, Optional.ofNullable(saveDir),
                keep == null ? CheckpointOptions.DEFAULT_KEEP : keep, Optional.ofNullable(resume));
        Device device = Backends.resolve(asked.fsdp().device(), out::println);
        // auto is decided here, once, and pinned ("cpu", or "cuda": one rank per GPU): the trainer,
        // the preflight and the engine place the ranks from the pinned request and have no
        // fallback to decide (or to print) again
        String pinned = Backends.pin(asked.fsdp().device(), device);
        TrainConfig config = asked.toBuilder().fsdp(f -> f.device(pinned)).build();
        LaunchControl.start();
        try (ProcessGroup processes = identity.isPresent()
                ? DistOptions.join(identity.get(), settings(config, checkpoints), config.fsdp().collectiveTimeout()) : null) {
            LaunchControl.formed();
            // --out (process 0's alone) is claimed once the processes have met, as --save-dir is:
            // refused before, process 0 would end before serving the store, and the others would
            // wait for it until their timeout (or the launcher's grace); now they stop at once
            try (OutputDir dir = OutputDir.claim(config.outDir(), "train", SUMMARY_FILE, MetricsLog.FILE,
                    RunCharts.LOSS_FILE, RunCharts.MEMORY_FILE)) {
                return train(out, dir, config, device, checkpoints, processes, first);
            } catch (RuntimeException | Error e) {
                if (processes != null) {       // the others stop now, with this reason
                    processes.fail(e.getMessage() != null ? e.getMessage() : e.toString());
                }
                throw e;
            }
        }
    }

    /**
     * What every process of a run must agree on: the configuration, and how it saves and resumes
     * (every process saves the same steps; the directories themselves may be mounted at
     * different paths on different nodes, so only whether there is one is compared).
     */
    static Map<String, String> settings(TrainConfig config, CheckpointOptions checkpoints) {
        // keyed by the flags a user types, values as typed (a mismatch is one line that lists them), not by
        // TrainConfig's field names; a field without a flag here keeps its name, so none is left out
        Map<String, String> settings = new LinkedHashMap<>();
        Settings.of(config, DistOptions.PER_PROCESS_SETTINGS).forEach((key, value) -> {
            if (!key.startsWith("model.")) {
                settings.put(FLAG_OF_SETTING.getOrDefault(key, key), value);
            }
        });
        settings.putAll(config.model().hf().flags());
        settings.put("--lr", Format.number(config.fsdp().lr()));
        settings.put("--min-lr", Format.number(config.minLr()));
        settings.put("--weight-decay", Format.number(config.fsdp().weightDecay()));
        settings.put("--max-grad-norm", Format.number(config.fsdp().maxGradNorm()));
        settings.put("--strategy", config.fsdp().strategy().cliName());
        settings.put("--param-dtype", config.fsdp().precision().paramDtype().shortName());
        settings.put("--reduce-dtype", config.fsdp().precision().reduceDtype().shortName());
        settings.put("--on-nonfinite", config.onNonFinite().action().cliName());
        settings.put("--collective-timeout", Long.toString(config.fsdp().collectiveTimeout().toSeconds()));
        settings.put("--save-every", Integer.toString(checkpoints.saveEvery()));
        settings.put("--keep", Integer.toString(checkpoints.keep()));
        settings.put("--save-dir", checkpoints.saveDir().isPresent() ? "given" : "none");
        settings.put("--resume", checkpoints.resume().map(r -> r.equals("latest") ? r : "a directory").orElse("none"));
        return settings;
    }

    /** TrainConfig's fields and its FsdpOptions' (as Settings names them) → the flag that sets each. */
    private static final Map<String, String> FLAG_OF_SETTING = Map.ofEntries(Map.entry("preset", "--preset"),
            Map.entry("steps", "--steps"), Map.entry("fsdp.seed", "--seed"), Map.entry("batchSize", "--batch-size"),
            Map.entry("seqLen", "--seq-len"), Map.entry("fsdp.lr", "--lr"), Map.entry("minLr", "--min-lr"),
            Map.entry("warmupSteps", "--warmup-steps"), Map.entry("fsdp.weightDecay", "--weight-decay"),
            Map.entry("fsdp.maxGradNorm", "--max-grad-norm"),
            Map.entry("fsdp.activationCheckpointing", "--checkpoint-activations"),
            Map.entry("fsdp.device", "--device"), Map.entry("dataFile", "--data"), Map.entry("tokenizer", "--tokenizer"),
            Map.entry("evalEvery", "--eval-every"), Map.entry("evalBatches", "--eval-batches"),
            Map.entry("initFrom", "--init-from"),
            Map.entry("fsdp.worldSize", "--world-size"), Map.entry("fsdp.strategy", "--strategy"),
            Map.entry("fsdp.shardGroupSize", "--shard-group-size"), Map.entry("fsdp.precision.paramDtype", "--param-dtype"),
            Map.entry("fsdp.precision.reduceDtype", "--reduce-dtype"), Map.entry("fsdp.prefetch", "--prefetch"),
            Map.entry("fsdp.microBatches", "--micro-batches"), Map.entry("fsdp.offload", "--offload"),
            Map.entry("fsdp.debugStreams", "--debug-streams"), Map.entry("onNonFinite.action", "--on-nonfinite"),
            Map.entry("onNonFinite.maxSkippedSteps", "--max-skipped-steps"),
            Map.entry("fsdp.collectiveTimeout", "--collective-timeout"));

    /** The run itself, once the configuration is resolved and, for a run over several processes, they have met. */
    private int train(PrintWriter out, OutputDir dir, TrainConfig config, Device device, CheckpointOptions checkpoints,
                      ProcessGroup processes, boolean first) {
        // every process writes its ranks' files there; process 0 holds the run's lock (here, after
        // the processes met, so that a refusal stops them all at once)
        OutputDir saves = OutputDir.claimSaveDir(checkpoints.saveDir(), first, "train");
        try {
            return train(out, dir, config, device, checkpoints, processes);
        } finally {
            saves.close();
        }
    }

    private int train(PrintWriter out, OutputDir dir, TrainConfig config, Device device, CheckpointOptions checkpoints,
                      ProcessGroup processes) {
        // each process checks its own host, for the ranks of every process of the run there
        Preflight.Report preflight = Preflight.check(config, device, StepCostModel.PLANNER,
                memoryLimit == null ? OptionalLong.empty() : OptionalLong.of(memoryLimit), true,
                processes == null ? Preflight.Placement.ALONE : Preflight.Placement.of(processes.identity()));
        refuseUnlessItFits(preflight, processes == null ? "" : " on host " + processes.hostOf(processes.process()));
        dir.removeEarlierReports();
        try (Trainer trainer = new Trainer(config, device, checkpoints, out::println, processes);
             SignalStop stop = SignalStop.install(trainer, (signal, why) -> abandon(trainer, dir, signal, why));
             MetricsLog metrics = MetricsLog.open(config.outDir());
             StepDisplay display = StepDisplay.create(out, config, trainer.resumedFrom().map(Trainer.ResumedFrom::step)
                     .orElse(0))) {
            LaunchControl.onStop(stop::forwarded);    // started by `fsdp4j launch`: its signals come through stdin
            RunLog.header(out, "train", trainer.info());
            if (processes != null) {
                out.println("  " + DistOptions.describe(processes.identity(), config.fsdp().worldSize(), device));
            }
            RunLog.preflight(out, preflight, config.steps(), force);
            boolean lossScaled = config.fsdp().precision().needsLossScaling();
            TrainSummary summary;
            try {
                summary = trainer.run(r -> {
                    display.step(r, lossScaled);
                    metrics.step(r);
                    if (trainer.memoryCheck().isPresent() && !display.memoryCheckShown()) {
                        display.memoryCheck(trainer.memoryCheck().get(), config.fsdp().worldSize());
                    }
                });
            } catch (RuntimeException | OutOfMemoryError e) {
                if (!stop.claimEnding()) {
                    waitForHalt();          // a signal's watchdog is writing the summary already
                }
                throw withSummary(e, trainer, dir);
            }
            if (!stop.claimEnding()) {
                waitForHalt();              // a signal abandoned the run and is writing its summary
            }
            display.close();
            // preemption: SIGTERM saves the steps done (the watchdog no longer runs: the ending is claimed).
            // Over several processes the stop they agreed on decides, so that all save or none does
            // (a signal may have reached only some of them).
            String stoppedBy = processes == null ? stop.signal().orElse(null) : trainer.outcome().interruptedBy();
            boolean savedAtStop = "SIGTERM".equals(stoppedBy) && trainer.saveAtStop();
            trainer.awaitCheckpoints();
            TrainSummary ended = trainer.summary();      // with the checkpoints written
            summary = ended;
            RunLog.footer(out, summary);
            Optional<Path> file = dir.write(SUMMARY_FILE, summary);
            Optional<String> noCharts = config.outDir().isPresent() ? ChartSupport.missing() : Optional.empty();
            noCharts.ifPresent(why -> out.println("charts: skipped (" + why + ")"));
            List<Path> charts = config.outDir().filter(d -> noCharts.isEmpty())
                    .map(d -> RunCharts.write(d, ended, trainer.memoryTimelines())).orElse(List.of());
            file.ifPresent(f -> out.println("summary: " + f + metrics.file().map(m -> " | metrics: " + m).orElse("")
                    + (charts.isEmpty() ? "" : " | charts: " + charts.stream().map(Path::toString)
                            .collect(Collectors.joining(", ")))));
            out.flush();
            if (savedAtStop) {
                Path saved = summary.checkpoints().get(summary.checkpoints().size() - 1).dir();
                spec.commandLine().getErr().println("stopped by SIGTERM after step " + summary.steps() + " of "
                        + summary.outcome().plannedSteps() + "; checkpoint " + saved + " saved: continue with --resume latest"
                        + " --save-dir " + saveDir);
                spec.commandLine().getErr().flush();
                return ExitCode.OK.code();
            }
            return ending(config, summary, file);
        }
    }

    /** The exit code of a run that got to its end; divergence is a UserError, an interruption one line. */
    private int ending(TrainConfig config, TrainSummary summary, Optional<Path> file) {
        RunOutcome outcome = summary.outcome();
        String where = file.map(f -> "; summary: " + f).orElse("");
        if (outcome.diverged()) {
            throw new UserError(ExitCode.DIVERGED, divergence(config, outcome) + where);
        }
        if (outcome.interrupted()) {
            spec.commandLine().getErr().println("interrupted by " + outcome.interruptedBy() + " after step "
                    + summary.steps() + " of " + outcome.plannedSteps() + where);
            spec.commandLine().getErr().flush();
            return SignalStop.exitCodeFor(outcome.interruptedBy()).code();   // the signal of whichever process got one
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
                + "; the last update was not applied. Try a lower --lr (now " + Format.lr(c.fsdp().lr()) + ")"
                + (c.fsdp().maxGradNorm() > 0 ? "" : ", --max-grad-norm 1")
                + (c.fsdp().precision().needsLossScaling() ? ", or --param-dtype bf16 instead of fp16" : "")
                + (c.onNonFinite().action() == NonFinitePolicy.Action.STOP
                        ? ", or --on-nonfinite skip for rare bad batches" : "");
    }

    /**
     * Refuses a run the preflight says will not fit, with the figures and the flags that would
     * fit; {@code onHost} names the host checked in a run over several processes (" on host node7"), else "".
     */
    private void refuseUnlessItFits(Preflight.Report p, String onHost) {
        String fixes = p.fixes().isEmpty() ? ""
                : ": it fits with " + p.fixes().stream()
                        .map(f -> f.flags() + " (≈ " + Format.bytes(f.neededBytes()) + ")")
                        .collect(Collectors.joining(", or "));
        String need = "the run needs ≈ " + Format.bytes(p.neededBytes()) + " of " + p.memoryKind() + onHost + " at its peak ("
                + (p.sharingRanks() > 1 ? p.sharingRanks() + " ranks × "
                        + Format.bytes(p.cost().peakBytesPerRank() + p.reservedBytesPerRank()) + ": " : "")
                + Format.bytes(p.cost().persistentBytesPerRank()) + " state, "
                + Format.bytes(p.cost().activationBytesPerRank()) + " activations"
                + (p.cost().temporaryBytesPerRank() > 0 ? ", " + Format.bytes(p.cost().temporaryBytesPerRank())
                        + " unit buffers" : "")
                + (p.reservedBytesPerRank() > 0 ? ", " + Format.bytes(p.reservedBytesPerRank()) + " backend workspace" : "")
                + (p.sharingRanks() > 1 ? " per rank)" : ")")
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
    private void abandon(Trainer trainer, OutputDir dir, String signal, String why) {
        TrainSummary summary = trainer.summary();
        String where;
        try {
            where = dir.write(SUMMARY_FILE, summary).map(f -> "; summary: " + f).orElse("");
        } catch (RuntimeException e) {
            where = "; the summary could not be written: " + e.getMessage();
        }
        // a run of several processes records the stop only once they agree on its step: name the signal itself
        String by = summary.outcome().interruptedBy() != null ? summary.outcome().interruptedBy() : signal;
        spec.commandLine().getErr().println("interrupted by " + by + " during step "
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
