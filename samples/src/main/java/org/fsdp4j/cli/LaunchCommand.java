// `fsdp4j launch`: starts this node's processes of a run, as torchrun does (Launcher): each gets
// torchrun's variables, so `train` and `bench collectives` find each other with no flags.
//   fsdp4j launch --standalone --nproc-per-node 2 -- train --device cpu --world-size 4
//   fsdp4j launch --nnodes 2 --node-rank 0 --master-addr node0 -- train --device cpu --world-size 8
// By default one process per node runs all of that node's ranks as threads (--world-size / nodes);
// --nproc-per-node K starts K processes. Kubernetes training operators' PET_* variables give the
// defaults of the node flags. A first SIGINT or SIGTERM is passed on to the processes (they stop
// at the next step boundary), a second sends them SIGTERM, a third SIGKILL. The job's token comes
// from FSDP4J_JOB_TOKEN or FSDP4J_JOB_TOKEN_FILE; on one node, without one, the launcher makes one.
package org.fsdp4j.cli;

import java.lang.management.ManagementFactory;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.dist.Launcher;
import org.fsdp4j.dist.ProcessIdentity;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import sun.misc.Signal;
import sun.misc.SignalHandler;

@Command(name = "launch", mixinStandardHelpOptions = true,
        description = "Start this node's processes of a run (as torchrun does): fsdp4j launch [options] -- train ...")
final class LaunchCommand implements Callable<Integer> {

    @Option(names = "--standalone", description = "one node, this machine: master 127.0.0.1 on a free port")
    boolean standalone;

    @Option(names = "--nnodes", paramLabel = "M", description = "nodes in the run (default: PET_NNODES, else 1)")
    Integer nodes;

    @Option(names = "--node-rank", paramLabel = "R", description = "this node's index (default: PET_NODE_RANK, else 0)")
    Integer nodeRank;

    @Option(names = "--nproc-per-node", paramLabel = "K",
            description = "processes to start here; each runs --world-size / (M·K) ranks as threads (default:"
                    + " PET_NPROC_PER_NODE, else 1: one process for all of this node's ranks)")
    Integer perNode;

    @Option(names = "--master-addr", paramLabel = "HOST",
            description = "host of node 0, whose first process serves the rendezvous store (default: PET_MASTER_ADDR,"
                    + " MASTER_ADDR, else 127.0.0.1 on one node)")
    String masterAddr;

    @Option(names = "--master-port", paramLabel = "PORT",
            description = "port of the rendezvous store (default: PET_MASTER_PORT, MASTER_PORT, else 29500)")
    Integer masterPort;

    @Option(names = "--grace", paramLabel = "SECONDS", defaultValue = "30",
            description = "after a process fails, how long the others may take to stop by themselves before they get"
                    + " SIGTERM (default: ${DEFAULT-VALUE})")
    long graceSeconds;

    @Parameters(arity = "1..*", paramLabel = "COMMAND",
            description = "the fsdp4j command each process runs, after --: train ... or bench collectives ...")
    List<String> command;

    @Override
    public Integer call() {
        if (!List.of("train", "bench").contains(command.get(0))) {
            throw new UserError(ExitCode.BAD_INPUT, "launch runs an fsdp4j command (train or bench), not '" + command.get(0)
                    + "': fsdp4j launch --nproc-per-node 2 -- train --device cpu");
        }
        if (graceSeconds < 0) {
            throw new UserError(ExitCode.BAD_INPUT, "--grace must be >= 0 seconds, got " + graceSeconds);
        }
        Map<String, String> env = System.getenv();
        Launcher.Layout layout;
        if (standalone) {
            if (nodes != null && nodes != 1 || nodeRank != null && nodeRank != 0 || masterAddr != null) {
                throw new UserError(ExitCode.BAD_INPUT, "--standalone runs one node on this machine: drop --nnodes,"
                        + " --node-rank and --master-addr, or drop --standalone");
            }
            layout = new Launcher.Layout(1, 0, orDefault(perNode, env, "PET_NPROC_PER_NODE", 1), "127.0.0.1",
                    masterPort != null ? masterPort : freePort());
        } else {
            int m = orDefault(nodes, env, "PET_NNODES", 1);
            String addr = masterAddr != null ? masterAddr : env.getOrDefault("PET_MASTER_ADDR",
                    env.getOrDefault("MASTER_ADDR", m == 1 ? "127.0.0.1" : null));
            int port = masterPort != null ? masterPort
                    : orDefault(null, env, "PET_MASTER_PORT", orDefault(null, env, "MASTER_PORT",
                            ProcessIdentity.DEFAULT_MASTER_PORT));
            layout = new Launcher.Layout(m, orDefault(nodeRank, env, "PET_NODE_RANK", 0),
                    orDefault(perNode, env, "PET_NPROC_PER_NODE", 1), addr, port);
        }
        JobToken token = jobToken(layout, env);
        List<String> cmd = new ArrayList<>(javaCommand());
        cmd.addAll(command);
        Launcher launcher = new Launcher(layout, cmd, Map.of(), token, Duration.ofSeconds(graceSeconds), System.err);
        System.err.println("launch: " + layout.perNode() + (layout.perNode() == 1 ? " process" : " processes")
                + " on node " + layout.nodeRank() + " of " + layout.nodes() + " (processes " + layout.nodeRank() * layout.perNode()
                + ".." + ((layout.nodeRank() + 1) * layout.perNode() - 1) + " of " + layout.nodes() * layout.perNode()
                + "), master " + layout.masterAddr() + ":" + layout.masterPort());
        Map<String, SignalHandler> previous = new HashMap<>();
        AtomicInteger signals = new AtomicInteger();
        for (String name : List.of("INT", "TERM")) {
            try {
                previous.put(name, Signal.handle(new Signal(name), s -> {
                    int n = signals.incrementAndGet();
                    if (n == 1) {
                        launcher.forward("SIG" + s.getName());     // stop at the next step boundary
                    } else {
                        launcher.terminate(n > 2);
                    }
                }));
            } catch (IllegalArgumentException e) {
                // the JVM keeps this signal (-Xrs): its default handling stays
            }
        }
        try {
            return launcher.run();
        } finally {
            previous.forEach((name, handler) -> Signal.handle(new Signal(name), handler));
        }
    }

    /**
     * The job's token: the one the environment gives (FSDP4J_JOB_TOKEN or FSDP4J_JOB_TOKEN_FILE),
     * else, on one node, a new one (every process of the job is this launcher's child); several
     * nodes must share one, which no launcher can make for the others, so none given stops here.
     */
    static JobToken jobToken(Launcher.Layout layout, Map<String, String> env) {
        java.util.Optional<JobToken> given = JobToken.fromEnvironment(env);
        if (given.isPresent()) {
            return given.get();
        }
        if (layout.nodes() > 1) {
            throw new UserError(ExitCode.BAD_INPUT, "launch --nnodes " + layout.nodes() + " needs the job's token, the"
                    + " same on every node, and none was given: set " + JobToken.FILE_VARIABLE + " to a file only you can"
                    + " read, holding a secret (`" + JobToken.HOW_TO_MAKE + "`), on every node (or " + JobToken.VARIABLE
                    + " to it; docs/processes.md, \"Only this job's processes\")");
        }
        return JobToken.generate();
    }

    /**
     * This JVM again (its options, such as FSDP4J_JAVA_OPTS's, included) on the fsdp4j main class: on
     * the class path, as the jar runs, or as the module it was started as (its options then hold the
     * module path, and the main module is named again with -m rather than copied as a property).
     */
    private static List<String> javaCommand() {
        String java = ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> cmd = new ArrayList<>();
        cmd.add(java);
        Module module = Main.class.getModule();
        for (String option : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!(module.isNamed() && option.startsWith("-Djdk.module.main="))) {
                cmd.add(option);
            }
        }
        if (module.isNamed()) {
            cmd.add("-m");
            cmd.add(module.getName() + "/" + Main.class.getName());
        } else {
            cmd.add("-cp");
            cmd.add(System.getProperty("java.class.path"));
            cmd.add(Main.class.getName());
        }
        return cmd;
    }

    private static int orDefault(Integer flag, Map<String, String> env, String variable, int fallback) {
        if (flag != null) {
            return flag;
        }
        String v = env.get(variable);
        if (v == null || v.isBlank()) {
            return fallback;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new UserError(ExitCode.BAD_INPUT, variable + "='" + v + "' is not an integer");
        }
    }

    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {   // where the store binds
            return s.getLocalPort();
        } catch (java.io.IOException e) {
            throw new UserError(ExitCode.RENDEZVOUS_FAILED, "cannot find a free port for --standalone: " + e.getMessage());
        }
    }
}
