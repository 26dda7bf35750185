// The other end of `fsdp4j launch`'s control channel (Launcher): a process it started reads its
// stdin, where the launcher writes "stop SIGTERM" when it receives a signal, so that the run stops
// at a step boundary as if the process had got the signal itself (once, however many copies
// come: Ctrl-C reaches the launcher and its processes alike). The end of stdin means the launcher
// is gone (killed): the process stops too rather than train on unwatched. Processes not started
// by the launcher (FSDP4J_LAUNCHER_PID unset) leave their stdin alone.
package org.fsdp4j.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.function.Consumer;
import org.fsdp4j.dist.Launcher;

final class LaunchControl {

    private LaunchControl() {
    }

    /** When started by `fsdp4j launch`, hands each stop it passes on to {@code stop} (a signal's name). */
    static void watch(Consumer<String> stop) {
        if (System.getenv(Launcher.LAUNCHER_PID_VARIABLE) == null) {
            return;
        }
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    if (line.startsWith(Launcher.STOP_COMMAND)) {
                        stop.accept(line.substring(Launcher.STOP_COMMAND.length()).trim());
                    }
                }
            } catch (IOException e) {
                // stdin broke: the same as its end
            }
            System.err.println("fsdp4j: the launcher (pid " + System.getenv(Launcher.LAUNCHER_PID_VARIABLE)
                    + ") is gone; stopping after this step");
            stop.accept("SIGTERM");
        }, "fsdp4j-launch-control");
        t.setDaemon(true);
        t.start();
    }
}
