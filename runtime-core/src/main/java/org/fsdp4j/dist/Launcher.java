// What `fsdp4j launch` does on one node (torchrun's job, without its elastic restarts): starts
// --nproc-per-node processes of a command with torchrun's variables (MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK), so they find each other, and
// watches them. Their stdout goes straight to the launcher's; their stderr passes through it line
// by line (ChildErrors), so that a line every process prints alike (the "error: " line of a
// failure each finds the same way, a batch that does not split; a waiting notice) shows once. When one fails, the others stop by
// themselves (its connections close, its reason is in the store); any still running after the
// grace period get SIGTERM, then SIGKILL, so no process outlives the launcher's decision. The
// exit code is the first failure that a process chose itself other than 7 (1..127; 7 only says
// another rank failed, and a survivor may end before the process at the root), else 7 (a rank
// failed, or the only failures were deaths by a signal the launcher did not pass on); after a stop passed on from the launcher
// (SIGINT, SIGTERM), the first failure's code as it is; 0 when all succeed.
// NCCL_LAUNCH_ORDER_IMPLICIT=1 is set for the processes unless the environment sets it: GPU ranks
// then launch their collectives in the order they issue them (nccl-comm's IssueOrder). The job's
// token goes to every process in FSDP4J_JOB_TOKEN (an environment variable: a command line is
// readable by every user of the host).
//
// Signals reach the processes through their stdin ("stop SIGTERM": LaunchControl in samples),
// not as signals: a process then stops at a step boundary exactly as if it had got the signal
// itself, and Ctrl-C, which the terminal sends to the launcher and its processes alike, does not
// count twice. The end of that stdin tells a process its launcher is gone.
package org.fsdp4j.dist;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.fsdp4j.comm.JobToken;

public final class Launcher {

    /** Set in every process the launcher starts: its pid (and the sign that stdin is the control channel). */
    public static final String LAUNCHER_PID_VARIABLE = "FSDP4J_LAUNCHER_PID";
    /** The control line that passes a signal on: "stop SIGTERM". */
    public static final String STOP_COMMAND = "stop ";
    /**
     * The control line that tells the others a process ended ("ended process 0 (pid 42) exited
     * with 137 ..."): one still waiting to meet the others stops at once (LaunchControl).
     */
    public static final String ENDED_COMMAND = "ended ";
    /** How long a process that was sent SIGTERM gets before SIGKILL. */
    private static final Duration KILL_AFTER = Duration.ofSeconds(5);
    /** The job's exit code when a process died by a signal and none reported a failure of its own: a rank failed. */
    static final int RANK_FAILED = 7;

    /**
     * Where this node's processes sit in the run.
     *
     * @param nodes        nodes in the run (--nnodes)
     * @param nodeRank     this node's index (--node-rank)
     * @param perNode      processes started on each node (--nproc-per-node)
     * @param masterAddr   host of the process of rank 0 (on node 0), which serves the rendezvous store
     * @param masterPort   its port
     */
    public record Layout(int nodes, int nodeRank, int perNode, String masterAddr, int masterPort) {
        public Layout {
            if (nodes < 1) {
                throw new IllegalArgumentException("--nnodes must be at least 1, got " + nodes);
            }
            if (nodeRank < 0 || nodeRank >= nodes) {
                throw new IllegalArgumentException("--node-rank " + nodeRank + " is outside 0.." + (nodes - 1)
                        + " (--nnodes " + nodes + ")");
            }
            if (perNode < 1 || perNode > 1024) {
                throw new IllegalArgumentException("--nproc-per-node must be between 1 and 1024, got " + perNode);
            }
            if (masterAddr == null || masterAddr.isBlank()) {
                throw new IllegalArgumentException("--master-addr is required with --nnodes " + nodes
                        + ": the host of node 0 (or use --standalone on one machine)");
            }
            if (masterPort < 1 || masterPort > 65535) {
                throw new IllegalArgumentException("--master-port " + masterPort + " is not a TCP port (1-65535)");
            }
        }

        /** The rank of this node's process {@code local}. */
        int rank(int local) {
            return nodeRank * perNode + local;
        }
    }

    private final Layout layout;
    private final List<String> command;
    private final Map<String, String> environment;
    private final JobToken token;
    private final Duration grace;
    private final PrintStream log;
    private final List<Process> processes = new ArrayList<>();
    private final List<Thread> errorPumps = new ArrayList<>();          // by process, as processes
    private final ChildErrors childErrors;
    private volatile boolean stopPassedOn;      // a signal was passed on: exits 130/143 are the processes' answers

    /**
     * @param command     the program each process runs (java, its options, the main class, arguments)
     * @param environment extra variables for every process
     * @param token       the job's token, which every process gets
     * @param grace       how long the others may take to end by themselves after one failed
     * @param log         where the launcher's own lines go (stderr)
     */
    public Launcher(Layout layout, List<String> command, Map<String, String> environment, JobToken token, Duration grace,
                    PrintStream log) {
        this.layout = layout;
        this.command = List.copyOf(command);
        this.environment = Map.copyOf(environment);
        this.token = token;
        this.grace = grace;
        this.log = log;
        this.childErrors = new ChildErrors(log);
    }

    /** Starts this node's processes and waits for them; returns the exit code the launcher should end with. */
    public int run() {
        synchronized (processes) {
            for (int local = 0; local < layout.perNode(); local++) {
                try {
                    Process p = start(local);
                    processes.add(p);
                    errorPumps.add(childErrors.pump(p, local));
                } catch (IOException e) {
                    log.println("launch: cannot start process " + layout.rank(local) + " (" + e.getMessage() + ")");
                    processes.forEach(Process::destroyForcibly);
                    return 1;
                }
            }
        }
        return watch();
    }

    private Process start(int local) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.redirectOutput(ProcessBuilder.Redirect.INHERIT).redirectError(ProcessBuilder.Redirect.PIPE)
                .redirectInput(ProcessBuilder.Redirect.PIPE);
        Map<String, String> env = pb.environment();
        env.putAll(environment);
        env.put("MASTER_ADDR", layout.masterAddr());
        env.put("MASTER_PORT", Integer.toString(layout.masterPort()));
        env.put("WORLD_SIZE", Integer.toString(layout.nodes() * layout.perNode()));
        env.put("RANK", Integer.toString(layout.rank(local)));
        env.put("LOCAL_RANK", Integer.toString(local));
        env.put("LOCAL_WORLD_SIZE", Integer.toString(layout.perNode()));
        env.put("GROUP_RANK", Integer.toString(layout.nodeRank()));
        env.put(LAUNCHER_PID_VARIABLE, Long.toString(ProcessHandle.current().pid()));
        env.putIfAbsent("NCCL_LAUNCH_ORDER_IMPLICIT", "1");
        token.exportTo(env);
        return pb.start();
    }

    /** Waits for every process; after the first failure, gives the rest the grace period, then stops them. */
    private int watch() {
        int firstFailure = 0;
        int rootFailure = 0;                   // the first exit code in 1..127 but 7: a process's own reason
        long stopAt = Long.MAX_VALUE;          // when the survivors of a failure get SIGTERM
        boolean terminated = false;
        List<Process> running = new ArrayList<>(processes);
        while (!running.isEmpty()) {
            for (Process p : List.copyOf(running)) {
                if (p.isAlive()) {
                    continue;
                }
                running.remove(p);
                drainErrors(p);            // its last lines (its error) come before the launcher's word on it
                int code = p.exitValue();
                if (code != 0 && code != RANK_FAILED && rootFailure == 0 && code < 128 && !terminated) {
                    rootFailure = code;
                }
                if (code != 0 && firstFailure == 0) {
                    firstFailure = code;
                    log.println("launch: process " + rankOf(p) + " (pid " + p.pid() + ") " + describe(code)
                            + (running.isEmpty() ? "" : "; the others stop by themselves, or in " + grace.toSeconds() + " s"));
                    stopAt = System.nanoTime() + grace.toNanos();
                    tell(running, ENDED_COMMAND + "process " + rankOf(p) + " (pid " + p.pid() + ") " + describe(code));
                }
            }
            if (running.isEmpty()) {
                break;
            }
            if (System.nanoTime() > stopAt && !terminated) {
                log.println("launch: stopping the processes still running: " + ranksOf(running));
                // the handle's SIGTERM, not Process.destroy, which also closes the process's stdin:
                // the control channel, whose end would tell the process its launcher is gone
                running.forEach(p -> p.toHandle().destroy());
                running.forEach(Launcher::resume);
                terminated = true;
                stopAt = System.nanoTime() + KILL_AFTER.toNanos();
            } else if (System.nanoTime() > stopAt) {
                running.forEach(Process::destroyForcibly);
            }
            try {
                running.get(0).waitFor(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                processes.forEach(Process::destroyForcibly);
                return 1;
            }
        }
        return jobExitCode(firstFailure, rootFailure, stopPassedOn);
    }

    /** Waits (2 s at most: a process of its own may hold the pipe) until process {@code p}'s stderr has passed through. */
    private void drainErrors(Process p) {
        try {
            errorPumps.get(processes.indexOf(p)).join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The job's exit code (see the file comment): the reason a process gave for itself
     * ({@code rootFailure}, any code in 1..127 but 7), whichever process ended first, since 7 only
     * says that another rank failed (a survivor may end before the process at the root: its disk
     * full, exit 6); else 7; after a stop passed on, the first failure as it is.
     */
    static int jobExitCode(int firstFailure, int rootFailure, boolean stopPassedOn) {
        if (firstFailure == 0 || stopPassedOn) {
            return firstFailure;
        }
        return rootFailure != 0 ? rootFailure : RANK_FAILED;
    }

    /** Passes signal {@code name} ("SIGTERM") on to every process still running (see the file comment). */
    public void forward(String name) {
        stopPassedOn = true;
        List<Process> all;
        synchronized (processes) {
            all = List.copyOf(processes);
        }
        tell(all, STOP_COMMAND + name);
    }

    /** Writes {@code line} to the control channel of each of {@code to} still running. */
    private static void tell(List<Process> to, String line) {
        for (Process p : to) {
            try {
                OutputStream in = p.getOutputStream();
                synchronized (in) {
                    in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                    in.flush();
                }
            } catch (IOException e) {
                // it has ended already
            }
        }
    }

    /** Sends SIGTERM (or, with {@code force}, SIGKILL) to every process still running: a second or third signal. */
    public void terminate(boolean force) {
        List<Process> all;
        synchronized (processes) {
            all = List.copyOf(processes);
        }
        for (Process p : all) {
            if (force) {
                p.destroyForcibly();
            } else {
                p.toHandle().destroy();     // keeps the control channel open (see watch)
            }
        }
    }

    private int rankOf(Process p) {
        return layout.rank(processes.indexOf(p));
    }

    private String ranksOf(List<Process> ps) {
        List<Integer> ranks = new ArrayList<>();
        ps.forEach(p -> ranks.add(rankOf(p)));
        return "process" + (ranks.size() == 1 ? " " : "es ") + ranks.toString().replaceAll("[\\[\\]]", "");
    }

    /**
     * Sends SIGCONT to {@code p}, as systemd does after SIGTERM: a stopped process (SIGSTOP, a
     * debugger's) holds the SIGTERM pending until it runs again, and would otherwise wait for SIGKILL.
     */
    private static void resume(Process p) {
        try {
            new ProcessBuilder("kill", "-CONT", Long.toString(p.pid())).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException noKill) {
            // no kill(1) on this host: SIGKILL follows KILL_AFTER later
        }
    }

    /** "exited with 7", "exited with 137 (128 + signal 9: killed, or stopped by it)". */
    static String describe(int code) {
        return "exited with " + code + (code > 128 && code < 128 + 32 ? " (128 + signal " + (code - 128) + ")" : "");
    }
}
