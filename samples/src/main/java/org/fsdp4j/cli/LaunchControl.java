// The other end of `fsdp4j launch`'s control channel (Launcher): a process it started reads its
// stdin from the start, where the launcher writes
//   "stop SIGTERM" when it receives a signal, so that the run stops at a step boundary as if the
//     process had got the signal itself (once, however many copies come: Ctrl-C reaches the
//     launcher and its processes alike; one that comes before the run trains waits for it), and
//   "ended <who and how>" when another process of the node ended, so that a process still
//     waiting for the others to meet stops at once, naming it, instead of waiting for a store
//     that process would have served (once the run has formed, the run notices a lost process
//     itself, with more to say).
// The end of stdin means the launcher is gone (killed): the process stops too rather than train
// on unwatched. Processes not started by the launcher (FSDP4J_LAUNCHER_PID unset) leave their
// stdin alone. One channel per process, so its state is the class's.
package org.fsdp4j.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.function.Consumer;
import org.fsdp4j.dist.Launcher;

final class LaunchControl {

    private static final Object LOCK = new Object();
    /** How long a process told of another's end may take to end by itself (see ended). */
    private static final long OWN_END_MILLIS = 2000;
    private static boolean started;
    private static boolean formed;              // the processes have met
    private static Consumer<String> stops;      // the run's, once it trains
    private static String pendingStop;          // a stop that came before

    private LaunchControl() {
    }

    /** When started by `fsdp4j launch`, reads its control channel from now on (once per process). */
    static void start() {
        if (System.getenv(Launcher.LAUNCHER_PID_VARIABLE) == null) {
            return;
        }
        synchronized (LOCK) {
            if (started) {
                return;
            }
            started = true;
        }
        Thread t = new Thread(LaunchControl::read, "fsdp4j-launch-control");
        t.setDaemon(true);
        t.start();
    }

    /** The processes have met: a process that ends from now on is the run's to notice. */
    static void formed() {
        synchronized (LOCK) {
            formed = true;
        }
    }

    /** Hands each stop the launcher passes on to {@code stop} (a signal's name), one that came already first. */
    static void onStop(Consumer<String> stop) {
        String pending;
        synchronized (LOCK) {
            stops = stop;
            pending = pendingStop;
            pendingStop = null;
        }
        if (pending != null) {
            stop.accept(pending);
        }
    }

    private static void read() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.startsWith(Launcher.STOP_COMMAND)) {
                    stop(line.substring(Launcher.STOP_COMMAND.length()).trim());
                } else if (line.startsWith(Launcher.ENDED_COMMAND)) {
                    ended(line.substring(Launcher.ENDED_COMMAND.length()).trim());
                }
            }
        } catch (IOException e) {
            // stdin broke: the same as its end
        }
        System.err.println("fsdp4j: the launcher (pid " + System.getenv(Launcher.LAUNCHER_PID_VARIABLE)
                + ") is gone; stopping after this step");
        stop("SIGTERM");
    }

    private static void stop(String signal) {
        Consumer<String> to;
        synchronized (LOCK) {
            to = stops;
            if (to == null && pendingStop == null) {
                pendingStop = signal;
            }
        }
        if (to != null) {
            to.accept(signal);
        }
    }

    /**
     * Another process ended: before the processes met, this one cannot meet them either. It gets
     * a moment first to end by itself: a failure every process finds alike (a bad split) is then
     * its own line, the same as the other's, which the launcher shows once.
     */
    private static void ended(String who) {
        try {
            Thread.sleep(OWN_END_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        synchronized (LOCK) {
            if (formed) {
                return;
            }
        }
        System.err.println("error: the processes of the run cannot meet: " + who + " before they did (fsdp4j launch"
                + " saw it end)");
        System.err.flush();
        // the main thread is in the rendezvous (no step, no native work yet): nothing to wind down
        Runtime.getRuntime().halt(ExitCode.RENDEZVOUS_FAILED.code());
    }
}
