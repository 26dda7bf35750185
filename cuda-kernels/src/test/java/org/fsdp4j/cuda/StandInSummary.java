// The fake-GPU run's one line: after the tests of a module's "standin-test" execution, how many
// ran against the stand-in CUDA, cuBLAS and NCCL (not a GPU) and how they ended. Registered as a
// JUnit Platform listener (META-INF/services); silent in every other test run.
package org.fsdp4j.cuda;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

public final class StandInSummary implements TestExecutionListener {

    private final AtomicInteger passed = new AtomicInteger();
    private final AtomicInteger failed = new AtomicInteger();
    private final AtomicInteger skipped = new AtomicInteger();

    @Override
    public void executionSkipped(TestIdentifier test, String reason) {
        if (test.isTest()) {
            skipped.incrementAndGet();
        }
    }

    @Override
    public void executionFinished(TestIdentifier test, TestExecutionResult result) {
        if (!test.isTest()) {
            return;
        }
        switch (result.getStatus()) {
            case SUCCESSFUL -> passed.incrementAndGet();
            case ABORTED -> skipped.incrementAndGet();
            default -> failed.incrementAndGet();
        }
    }

    @Override
    public void testPlanExecutionFinished(TestPlan plan) {
        if (!StandIns.fakeGpuRun()) {
            return;
        }
        String what = StandIns.unavailable().map(w -> "skipped (" + w + ")")
                .orElseGet(() -> CudaProbe.probe().standIn() ? "ran against the stand-in CUDA, cuBLAS and NCCL (not a GPU)"
                        : "ran on " + CudaProbe.probe().describe());
        System.out.println("[stand-in] gpu suite " + what + ": " + passed + " passed, " + failed + " failed, " + skipped
                + " skipped");
    }
}
