// The launcher's copy of its processes' stderr, line by line, to its own. A line that starts with
// "error: " (a failure's one line) or is a waiting notice (WaitNotices), and that another of the
// launcher's processes has already printed word for word, is dropped: a failure every process finds
// the same way (a batch that does not split over --world-size, a --shard-group-size that does not
// divide) or a process that every survivor names then shows once in the job's log, while each
// process started by hand (its own log) still prints it. Everything else passes as it comes, each
// process's lines in their order; a line without its end yet waits for it (up to 64 KiB: then it
// passes as it is). Why here and not in the processes: a process cannot know whether the others
// failed alike, and only the launcher sees them all. The cost: a launcher killed with SIGKILL takes
// its processes' stderr with it (they stop after the step anyway, as the end of their stdin says).
// stdout, with process 0's progress bar, still goes straight to the terminal.
package org.fsdp4j.dist;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

final class ChildErrors {

    private static final int MAX_LINE = 64 * 1024;
    private static final byte[] ERROR = "error: ".getBytes(StandardCharsets.UTF_8);
    private static final byte[] WAITING = WaitNotices.PREFIX.getBytes(StandardCharsets.UTF_8);

    private final PrintStream log;
    private final Map<String, Integer> shownBy = new HashMap<>();    // collapsible line → the process that showed it

    ChildErrors(PrintStream log) {
        this.log = log;
    }

    /** Starts the thread that copies {@code p}'s stderr (the launcher's process {@code local}) until its end. */
    Thread pump(Process p, int local) {
        Thread t = new Thread(() -> copy(p.getErrorStream(), local), "fsdp4j-launch-stderr-" + local);
        t.setDaemon(true);
        t.start();
        return t;
    }

    private void copy(InputStream in, int local) {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        try (in) {
            for (int n = in.read(buf); n >= 0; n = in.read(buf)) {
                for (int i = 0; i < n; i++) {
                    line.write(buf[i]);
                    if (buf[i] == '\n' || line.size() >= MAX_LINE) {
                        show(line.toByteArray(), local);
                        line.reset();
                    }
                }
            }
        } catch (IOException e) {
            // the process ended and its pipe with it
        }
        if (line.size() > 0) {
            show(line.toByteArray(), local);
        }
    }

    private void show(byte[] line, int local) {
        if (startsWith(line, ERROR) || startsWith(line, WAITING)) {
            String key = new String(line, StandardCharsets.UTF_8);
            synchronized (shownBy) {
                Integer by = shownBy.putIfAbsent(key, local);
                if (by != null && by != local) {
                    return;         // another process said it already
                }
            }
        }
        synchronized (log) {
            log.write(line, 0, line.length);
            log.flush();
        }
    }

    private static boolean startsWith(byte[] line, byte[] prefix) {
        if (line.length < prefix.length) {
            return false;
        }
        for (int i = 0; i < prefix.length; i++) {
            if (line[i] != prefix[i]) {
                return false;
            }
        }
        return true;
    }
}
