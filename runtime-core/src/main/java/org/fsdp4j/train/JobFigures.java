// How the processes of one run pool what their ranks measured, so that process 0, which prints
// and writes --out, reports for all N ranks. Per step, the figures ride on the stop vote every
// process makes at the step's end anyway (ProcessGroup.agreeToStop): on the first step always
// (the memory check compares every rank), on the others only when process 0 writes metrics.jsonl
// (--out). That costs each process one or two store round trips per step (agreeToStop counts
// them) and a vote at the last step, which otherwise has none; without --out the steps after the
// first cost nothing beyond the vote (the processes learn once, at the second step, that process
// 0 does not want them), and the step lines then show process 0's ranks. At the end of the run
// every process sends its per-rank figures for the summary (ProcessGroup.exchange, on the vote's
// own store connection); a process found dead or an abort fails it at once (CommException).
package org.fsdp4j.train;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.fsdp4j.dist.ProcessGroup;

final class JobFigures {

    private final ProcessGroup group;
    private final boolean writesMetrics;       // meaningful on process 0: it asks for every step's figures
    private Boolean everyStep;                 // learnt from process 0 at the second step

    /**
     * What a step's end decided: the agreed reason to stop (null: go on), and on process 0 when
     * figures were carried, the whole run's (else null).
     */
    record StepEnd(String stopReason, StepFigures wholeRun) {
    }

    JobFigures(ProcessGroup group, boolean writesMetrics) {
        this.group = group;
        this.writesMetrics = writesMetrics;
    }

    /**
     * The end of step {@code step}: votes on {@code stopRequest} and carries {@code mine} when the
     * figures go to process 0 at this step ({@code firstHere}: the first step this process ran).
     * At the run's {@code last} planned step nothing is voted on, so the processes meet only to
     * carry figures. Every process calls it at every step with the same {@code step}, {@code last}
     * and {@code firstHere}.
     */
    StepEnd stepEnd(int step, boolean last, String stopRequest, StepFigures mine, boolean firstHere) {
        boolean carry = firstHere || everyStep();
        if (!carry) {
            return new StepEnd(last ? null : group.agreeToStop(step, stopRequest), null);
        }
        ProcessGroup.StopVote vote = group.agreeToStop(step, stopRequest, mine.encode());
        if (vote.figuresByProcess() == null) {
            return new StepEnd(vote.reason(), null);
        }
        List<StepFigures> byProcess = new ArrayList<>();
        byProcess.add(mine);
        for (int q = 1; q < vote.figuresByProcess().size(); q++) {
            byProcess.add(StepFigures.decode(vote.figuresByProcess().get(q)));
        }
        return new StepEnd(vote.reason(), StepFigures.merge(byProcess));
    }

    /** Whether process 0 asked for every step's figures (a few store round trips, the first time). */
    private boolean everyStep() {
        if (everyStep == null) {
            byte[] asked = group.exchange("figures-every-step", Boolean.toString(writesMetrics)
                    .getBytes(StandardCharsets.UTF_8), "whether process 0 writes metrics").get(0);
            everyStep = Boolean.parseBoolean(new String(asked, StandardCharsets.UTF_8));
        }
        return everyStep;
    }

    /**
     * Every process's per-rank figures, joined in rank order; every process must call it once, at
     * the end of the run. Fails (CommException) as soon as a process is found dead or the run
     * aborted, or after the timeout.
     */
    RankFigures gather(RankFigures mine) {
        List<RankFigures> byProcess = new ArrayList<>();
        for (byte[] encoded : group.exchange("summary-figures", mine.encode(), "the per-rank figures")) {
            byProcess.add(RankFigures.decode(encoded));
        }
        return RankFigures.join(byProcess);
    }
}
