// How a run's steps reach the person watching: on a terminal, a progress bar with the ETA and the
// last step's loss, speed and memory (me.tongfei:progressbar, which sizes itself to the terminal);
// otherwise (a file, a pipe, CI) the plain step lines RunLog prints. Other lines (the memory check,
// checkpoints) are printed either way.
package org.fsdp4j.cli;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import java.io.PrintWriter;
import java.time.Duration;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;
import org.fsdp4j.train.MemoryCheck;
import org.fsdp4j.train.StepResult;
import org.fsdp4j.train.TrainConfig;

final class StepDisplay implements AutoCloseable {

    private final PrintWriter out;
    private final ProgressBar bar;       // null: plain lines
    private boolean memoryCheckShown;
    private boolean closed;

    private StepDisplay(PrintWriter out, ProgressBar bar) {
        this.out = out;
        this.bar = bar;
    }

    /** A bar when stdout is a terminal (and the run's output is not redirected), else plain lines. */
    static StepDisplay create(PrintWriter out, TrainConfig config, int firstStepDone) {
        if (System.console() == null || Fsdp4jSystemProperties.plainSteps()) {
            return new StepDisplay(out, null);
        }
        ProgressBar bar = new ProgressBarBuilder().setTaskName("train").setInitialMax(config.steps())
                .startsFrom(firstStepDone, Duration.ZERO).setStyle(ProgressBarStyle.COLORFUL_UNICODE_BLOCK)
                .setUpdateIntervalMillis(250).showSpeed(new java.text.DecimalFormat("0.00")).setUnit(" steps", 1)
                .continuousUpdate().setConsumer(new me.tongfei.progressbar.ConsoleProgressBarConsumer(System.out)).build();
        return new StepDisplay(out, bar);
    }

    void step(StepResult r, boolean lossScaled) {
        if (bar == null) {
            RunLog.step(out, r, lossScaled);
            return;
        }
        bar.stepTo(r.step());
        bar.setExtraMessage(Format.f(" | loss %.4f%s | %.0f ms | %s tok/s | mem %s%s", r.loss(), RunLog.val(r), r.timeMs(),
                Format.count(r.tokensPerSecond()), Format.bytes(r.peakBytes()), r.skipped() ? " | skipped" : ""));
    }

    boolean memoryCheckShown() {
        return memoryCheckShown;
    }

    /** The planner's prediction beside what the first step measured, once. */
    void memoryCheck(MemoryCheck m, int ranks) {
        memoryCheckShown = true;
        String line = Format.f("  planner vs measured after the first step, per rank: persistent %s vs %s | peak %s vs %s"
                        + " (%+.1f%%)%s", Format.bytes(m.predictedPersistentBytes()), Format.bytes(m.measuredPersistentBytes()),
                Format.bytes(m.predictedPeakBytes()), Format.bytes(java.util.Arrays.stream(m.measuredPeakBytesPerRank())
                        .max().orElse(0)), 100 * m.peakError(), ranks > 1 ? " (the largest of " + ranks + " ranks)" : "");
        if (bar != null) {
            out.flush();
            System.out.print("\r\033[K");     // the bar redraws itself below the line
            System.out.flush();
        }
        out.println(line);
        out.flush();
    }

    /** Ends the bar (idempotent: the run closes it before its last lines, and again on the way out). */
    @Override
    public void close() {
        if (bar != null && !closed) {
            bar.close();
        }
        closed = true;
    }
}
