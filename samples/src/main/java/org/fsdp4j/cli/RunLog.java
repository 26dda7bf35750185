// The lines a training run prints: the resolved configuration once, the preflight's estimate,
// one line per step (saying why a step was skipped), and the closing line with the gap to the
// loss floor. Used by `train` and the step benchmarks, so they read the same.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import org.fsdp4j.train.Preflight;
import org.fsdp4j.train.RunInfo;
import org.fsdp4j.train.StepResult;
import org.fsdp4j.train.TrainConfig;
import org.fsdp4j.train.TrainSummary;
import org.fsdp4j.train.Trainer;

final class RunLog {

    private RunLog() {
    }

    static void header(PrintWriter out, String command, RunInfo info) {
        TrainConfig c = info.config();
        out.println(Format.f("fsdp4j %s | %s preset %s: %s | %s params", command, c.model().family(), c.preset(),
                c.model().describe(), Format.count(info.parameters())));
        out.println(Format.f("  device %s: %s | world size %d | compute in %s", info.device(), info.backendName(),
                info.worldSize(), c.fsdp().precision().paramDtype().shortName()));
        String floor = info.lossFloorNats().isPresent()
                ? Format.f("loss floor %.4f nats (entropy rate of the source)", info.lossFloorNats().getAsDouble())
                : "loss floor unknown";
        out.println("  data " + info.data() + " | " + floor);
        out.println(Format.f("  steps %d | batch %d x %d = %d tokens | lr %s -> %s, warm-up %d | weight decay %s | clip %s | seed %d%s",
                c.steps(), c.batchSize(), c.seqLen(), c.tokensPerStep(), Format.lr(c.fsdp().lr()), Format.lr(c.minLr()),
                c.warmupSteps(), c.fsdp().weightDecay(), c.fsdp().maxGradNorm() > 0 ? String.valueOf(c.fsdp().maxGradNorm()) : "off",
                c.fsdp().seed(), c.fsdp().activationCheckpointing() ? " | activation checkpointing" : ""));
        c.initFrom().ifPresent(p -> out.println("  initial parameters from " + p + " (pretrained weights; each rank read"
                + " its shards' values)"));
        if (c.reportsSharding()) {
            out.println(Format.f("  sharding %s over %d ranks (shard groups of %d) | %s | prefetch %d | micro-batches %d%s",
                    c.fsdp().strategy().cliName(), c.fsdp().worldSize(), c.fsdp().shardSize(), c.fsdp().precision(), c.fsdp().prefetch(),
                    c.fsdp().microBatches(), c.fsdp().offload() ? " | offload to host" : ""));
            info.gatherSchedule().filter(pl -> pl.budgetBytes() > 0).ifPresent(pl -> out.println(Format.f(
                    "  unit buffers %s: gathered params + unsharded grads peak at %s, %s the %s of %d gathered units + one gradient",
                    pl.name(), Format.bytes(pl.peakBytes()), pl.fitsBudget() ? "within" : "OVER",
                    Format.bytes(pl.budgetBytes()), 1 + c.fsdp().prefetch())));
        }
        out.flush();
    }

    /** One step; {@code lossScaled}: fp16's loss scaler skips on inf/NaN gradients and lowers its scale. */
    static void step(PrintWriter out, StepResult r, boolean lossScaled) {
        out.println(Format.f("step %d/%d | loss %.4f%s | norm %.4f | lr %s | %.1f ms | %s tok/s | mem %s%s%s",
                r.step(), r.totalSteps(), r.loss(), val(r), r.gradNorm(), Format.lr(r.lr()), r.timeMs(),
                Format.count(r.tokensPerSecond()), Format.bytesSplit(r.peakBytes(), r.peakSplit()),
                r.commBytes() > 0 ? " | comm " + Format.bytes(r.commBytes()) : "", skipped(r, lossScaled)));
        out.flush();
    }

    /** " | val X.XXXX" on a step the validation loss was measured after, else nothing. */
    static String val(StepResult r) {
        return r.evaluated() ? Format.f(" | val %.4f", r.valLoss()) : "";
    }

    /** Why a step was skipped: fp16 says whether the loss itself or only the gradients overflowed. */
    private static String skipped(StepResult r, boolean lossScaled) {
        if (!r.skipped()) {
            return "";
        }
        if (!Float.isFinite(r.loss())) {
            return " | skipped: the loss is not finite, parameters not updated";
        }
        return lossScaled ? " | skipped: gradients overflowed fp16, loss scale lowered"
                : " | skipped: inf/NaN gradients, parameters not updated";
    }

    /**
     * The preflight's estimate, once, after the header: the peak per rank against what the device
     * has, and the time a step and the whole run will take.
     */
    static void preflight(PrintWriter out, Preflight.Report p, int steps, boolean forced) {
        long perRank = p.cost().peakBytesPerRank() + p.reservedBytesPerRank();
        StringBuilder line = new StringBuilder("  preflight: peak ≈ ").append(Format.bytes(perRank)).append(" per rank");
        if (p.reservedBytesPerRank() > 0) {
            line.append(", ").append(Format.bytes(p.reservedBytesPerRank())).append(" of it the backend's workspace");
        }
        if (p.sharingRanks() > 1 || p.neededBytes() != perRank) {
            line.append(" (").append(Format.bytes(p.neededBytes())).append(" for ").append(p.sharingRanks())
                    .append(p.sharingRanks() == 1 ? " rank" : " ranks").append(p.cost().hostBytesPerRank() > 0
                            ? " with offloaded state" : "").append(")");
        }
        if (p.availableBytes().isPresent()) {
            long available = p.availableBytes().getAsLong();
            line.append(Format.f(", %s %s available", Format.bytes(available), p.memoryKind()));
            if (!p.fitsMemory()) {
                line.append(forced ? " (OVER: --force)" : " (OVER)");
            } else if (p.neededBytes() > 0.8 * available) {
                line.append(" (close to the limit)");
            }
        }
        // a guess from timing one GEMM for a few ms, not a measured step: said so, since other work on
        // the machine or a step unlike a GEMM can put it far off (the step lines show the real time)
        p.stepTimeMs().ifPresent(ms -> line.append(" | ≈ ").append(Format.duration(ms / 1e3)).append("/step, about ")
                .append(Format.duration(ms / 1e3 * steps)).append(" for ").append(steps).append(steps == 1 ? " step" : " steps")
                .append(" (estimated from a short GEMM probe, not a measured step)"));
        out.println(line);
        out.flush();
    }

    static void footer(PrintWriter out, TrainSummary s) {
        if (s.steps() == 0) {
            out.println("done: no step completed");
            out.flush();
            return;
        }
        String line = Format.f("done: %d steps in %.1f s | median %.1f ms/step, %s tok/s | final loss %.4f | mean of last %d %.4f",
                s.steps(), s.totalTimeS(), s.stepTimeMsMedian(), Format.count(s.tokensPerSecond()), s.finalLoss(),
                Math.min(Trainer.TAIL_STEPS, s.steps()), s.tailLossMean());
        if (s.finalValLoss() != null) {
            line += Format.f(" | val %.4f (step %d)", s.finalValLoss(), s.valLosses().get(s.valLosses().size() - 1).step());
        }
        if (s.outcome().skippedSteps() > 0) {
            line += " | " + s.outcome().skippedSteps() + " skipped";
        }
        if (s.lossFloor() != null && Double.isFinite(s.tailLossMean())) {
            line += Format.f(" | floor %.4f | gap %.4f nats", s.lossFloor(), s.tailLossMean() - s.lossFloor());
        }
        out.println(line);
        out.println(Format.f("  host syncs per step %d | promoted copies %d", s.hostSyncsPerStep(), s.promotedCopies()));
        out.flush();
    }
}
