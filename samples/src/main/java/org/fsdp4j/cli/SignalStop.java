// SIGINT (Ctrl-C) and SIGTERM during a training run: the first signal asks the trainer to stop
// after the step in progress, so the run ends normally and writes the summary of the steps done
// (marked interrupted) and exits 130 or 143. A step that does not finish within the grace period
// is abandoned, as it is at once on a second signal: the summary of the completed steps is
// written from here and the JVM halts. Halting (rather than exiting) skips the shutdown hooks,
// which would free native buffers a running GEMM still reads (a crash seen with the JVM's own
// SIGINT handling); a step cannot be interrupted inside native code. Only the train command
// installs this; where the signal was ignored when the JVM started (nohup, a background job),
// it stays ignored. sun.misc.Signal (module jdk.unsupported) is the JDK's only way to handle a
// signal; javac warns about it, and only LaunchCommand needs it besides.
package org.fsdp4j.cli;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import org.fsdp4j.train.Trainer;
import sun.misc.Signal;
import sun.misc.SignalHandler;

final class SignalStop implements AutoCloseable {

    /** How long the step in progress may take to finish after the first signal. */
    static final Duration GRACE = Duration.ofSeconds(5);

    private static final Map<String, ExitCode> SIGNALS = Map.of("INT", ExitCode.SIGINT, "TERM", ExitCode.SIGTERM);

    private final Trainer trainer;
    private final BiConsumer<String, String> abandon;   // (signal, why): writes the summary and says why; then we halt
    private final AtomicReference<String> received = new AtomicReference<>();
    private final AtomicBoolean ending = new AtomicBoolean();    // main's normal ending or abandon, whichever first
    private final Map<String, SignalHandler> previous = new java.util.HashMap<>();

    private SignalStop(Trainer trainer, BiConsumer<String, String> abandon) {
        this.trainer = trainer;
        this.abandon = abandon;
    }

    /**
     * Handles SIGINT and SIGTERM for {@code trainer}'s run until closed. {@code abandon} gets the
     * first signal's name ("SIGTERM") and why the step in progress was abandoned, writes what it
     * can and returns soon; then the JVM halts.
     */
    static SignalStop install(Trainer trainer, BiConsumer<String, String> abandon) {
        SignalStop stop = new SignalStop(trainer, abandon);
        for (String name : SIGNALS.keySet()) {
            try {
                stop.previous.put(name, Signal.handle(new Signal(name), stop::handle));
            } catch (IllegalArgumentException e) {
                // the JVM keeps this signal (-Xrs): its default handling stays
            }
        }
        return stop;
    }

    private void handle(Signal signal) {
        String name = "SIG" + signal.getName();
        if (received.compareAndSet(null, name)) {
            firstSignal(name);
        } else if (ending.compareAndSet(false, true)) {
            abandonAndHalt("a second signal came");    // do not wait for the step
        } else {
            Runtime.getRuntime().halt(exitCode().code());   // ... nor for an ending under way
        }
    }

    /**
     * A signal that `fsdp4j launch` received and passed on to this process (LaunchControl):
     * handled as this process's first signal would be, and nothing if a signal came already
     * (the terminal sends Ctrl-C to the launcher and its processes alike).
     */
    void forwarded(String name) {
        if (received.compareAndSet(null, name)) {
            firstSignal(name);
        }
    }

    private void firstSignal(String name) {
        trainer.requestStop(name);
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(GRACE.toMillis());
            } catch (InterruptedException e) {
                return;
            }
            if (ending.compareAndSet(false, true)) {   // the step is still running: abandon it
                abandonAndHalt("it did not finish within " + GRACE.toSeconds() + " s");
            }
        }, "fsdp4j-stop-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    /** Called once the caller has won {@code ending}: writes what is known and halts. */
    private void abandonAndHalt(String why) {
        try {
            abandon.accept(received.get(), why);
        } finally {
            Runtime.getRuntime().halt(exitCode().code());
        }
    }

    /**
     * Called by the main thread when the run loop has returned, before it writes the summary;
     * false when a signal already abandoned the run (the JVM is halting: do nothing more).
     */
    boolean claimEnding() {
        return ending.compareAndSet(false, true);
    }

    /** The first signal received, as "SIGINT" or "SIGTERM". */
    Optional<String> signal() {
        return Optional.ofNullable(received.get());
    }

    /** 130 after SIGINT, 143 after SIGTERM (0 when none came). */
    ExitCode exitCode() {
        return exitCodeFor(received.get());
    }

    /** 130 for "SIGINT", 143 for "SIGTERM", 0 for null (a run of several processes stops on any one's signal). */
    static ExitCode exitCodeFor(String signalName) {
        return signalName == null || !signalName.startsWith("SIG") ? ExitCode.OK
                : SIGNALS.getOrDefault(signalName.substring(3), ExitCode.OK);
    }

    /** Restores the handlers that were there before. */
    @Override
    public void close() {
        previous.forEach((name, handler) -> Signal.handle(new Signal(name), handler));
        previous.clear();
    }
}
