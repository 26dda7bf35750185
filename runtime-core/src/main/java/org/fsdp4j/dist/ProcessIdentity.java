// Who this process is in a run of several: its index among the processes, how many there are,
// which of its node's processes it is, the node's index, and where the rendezvous store is.
// resolve() reads it, in this order, from the command line, torchrun's variables (which
// Kubernetes training operators also set), Slurm's and Open MPI's; the first source that names a
// rank gives the rank, the count and the local layout, while the master address and port each
// come from the first source that has one. Every inconsistency is an IllegalArgumentException
// that names the variables involved. Beside the identity it carries the job's access (JobAccess:
// the token and the bind settings, from the environment whatever the source).
package org.fsdp4j.dist;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * @param rank       this process's index, 0 ≤ rank < count (torchrun's RANK)
 * @param count      processes in the run (torchrun's WORLD_SIZE)
 * @param localRank  index among the processes of this node (LOCAL_RANK)
 * @param localCount processes on this node (LOCAL_WORLD_SIZE)
 * @param nodeRank   this node's index (GROUP_RANK)
 * @param masterAddr host of the rendezvous store, served by the process of rank 0
 * @param masterPort its port
 * @param source     where the identity came from, for the log ("torchrun's variables")
 * @param access     the job's token and where to listen (JobAccess.NONE: no token, the default addresses)
 */
public record ProcessIdentity(int rank, int count, int localRank, int localCount, int nodeRank, String masterAddr,
                              int masterPort, String source, JobAccess access) {

    /** torchrun's default master port. */
    public static final int DEFAULT_MASTER_PORT = 29500;

    public ProcessIdentity {
        if (count < 1 || rank < 0 || rank >= count) {
            throw new IllegalArgumentException("process rank " + rank + " is outside a run of " + count
                    + " processes (from " + source + ")");
        }
        if (localCount < 1 || localRank < 0 || localRank >= localCount || localCount > count) {
            throw new IllegalArgumentException("local process rank " + localRank + " of " + localCount
                    + " on this node does not fit a run of " + count + " processes (from " + source + ")");
        }
        if (nodeRank < 0) {
            throw new IllegalArgumentException("node rank " + nodeRank + " is negative (from " + source + ")");
        }
        if (masterPort < 1 || masterPort > 65535) {
            throw new IllegalArgumentException("master port " + masterPort + " is not a TCP port (1-65535)");
        }
        if (masterAddr == null || masterAddr.isBlank()) {
            throw new IllegalArgumentException("no master address (from " + source + ")");
        }
        if (access == null) {
            throw new IllegalArgumentException("no job access (JobAccess.NONE for none)");
        }
    }

    /** An identity without a token, listening where the defaults say (tests, and runs on one host). */
    public ProcessIdentity(int rank, int count, int localRank, int localCount, int nodeRank, String masterAddr,
                           int masterPort, String source) {
        this(rank, count, localRank, localCount, nodeRank, masterAddr, masterPort, source, JobAccess.NONE);
    }

    /** The same process with {@code a} as its job's access. */
    public ProcessIdentity withAccess(JobAccess a) {
        return new ProcessIdentity(rank, count, localRank, localCount, nodeRank, masterAddr, masterPort, source, a);
    }

    /**
     * Whether the run's processes may be on several hosts: its master address is not a loopback
     * address of this host (a name that does not resolve counts as another host). A loopback
     * master means every process is on this host, whatever LOCAL_WORLD_SIZE says (torchrun's
     * variables default it to 1).
     */
    public boolean maySpanHosts() {
        try {
            return !InetAddress.getByName(masterAddr).isLoopbackAddress();
        } catch (UnknownHostException | SecurityException e) {
            return true;
        }
    }

    /**
     * Throws IllegalArgumentException (one line saying how to give one) when the run may span
     * hosts and has no job token: its store would otherwise admit anyone who reaches its port.
     */
    public void requireTokenAcrossHosts() {
        if (access.token().isNone() && maySpanHosts()) {
            throw new IllegalArgumentException("the master address " + masterAddr + " is not this host's loopback, so the"
                    + " processes may be on several hosts, and no job token was given: set "
                    + org.fsdp4j.comm.JobToken.FILE_VARIABLE + " to a file only you can read, holding a secret (`"
                    + org.fsdp4j.comm.JobToken.HOW_TO_MAKE + "`), the same for every process (or "
                    + org.fsdp4j.comm.JobToken.VARIABLE + " to it; docs/processes.md, \"Only this job's processes\")");
        }
    }

    /** One process alone: nothing to meet. */
    public boolean alone() {
        return count == 1;
    }

    /** The identity the command line gives; each field null unless its flag was given. */
    public record Explicit(Integer rank, Integer count, Integer localRank, Integer localCount, Integer nodeRank,
                           String masterAddr, Integer masterPort) {
        public static final Explicit NONE = new Explicit(null, null, null, null, null, null, null);
    }

    /**
     * This process's identity from {@code cli} and the environment {@code env}, or empty when
     * nothing says it is one of several (then it runs alone).
     */
    public static Optional<ProcessIdentity> resolve(Explicit cli, Map<String, String> env) {
        Function<String, String> var = name -> {
            String v = env.get(name);
            return v == null || v.isBlank() ? null : v.trim();
        };
        Layout layout;
        if (cli.rank() != null || cli.count() != null) {
            layout = fromCommandLine(cli);
        } else if (var.apply("RANK") != null || var.apply("WORLD_SIZE") != null) {
            layout = fromTorchrun(var);
        } else if (var.apply("SLURM_PROCID") != null) {
            layout = fromSlurm(var);
        } else if (var.apply("OMPI_COMM_WORLD_RANK") != null) {
            layout = fromOpenMpi(var);
        } else {
            return Optional.empty();
        }
        if (layout.count < 1 || layout.rank < 0 || layout.rank >= layout.count) {
            throw new IllegalArgumentException("process rank " + layout.rank + " is outside a run of " + layout.count
                    + " processes (from " + layout.source + ")");
        }
        String addr = firstOf(cli.masterAddr(), var.apply("MASTER_ADDR"));
        if (addr == null && layout.slurmNodeList != null) {
            addr = SlurmNodeList.firstHost(layout.slurmNodeList);
        }
        if (addr == null) {
            if (layout.localCount != layout.count) {
                throw new IllegalArgumentException(layout.count + " processes on " + (layout.count / layout.localCount)
                        + " nodes (from " + layout.source + ") need the master's address: give --master-addr or"
                        + " set MASTER_ADDR to the host of the process of rank 0");
            }
            addr = "127.0.0.1";     // every process on this machine
        }
        int port;
        if (cli.masterPort() != null) {
            port = cli.masterPort();
        } else if (var.apply("MASTER_PORT") != null) {
            port = parse("MASTER_PORT", var.apply("MASTER_PORT"));
        } else if (layout.slurmJobId != null) {
            // several jobs may share a node: each job its own port, the same in all its processes
            port = DEFAULT_MASTER_PORT + (int) (Long.parseLong(layout.slurmJobId) % 10_000);
        } else {
            port = DEFAULT_MASTER_PORT;
        }
        return Optional.of(new ProcessIdentity(layout.rank, layout.count, layout.localRank, layout.localCount,
                layout.nodeRank, addr, port, layout.source, JobAccess.fromEnvironment(env)));
    }

    /** The ranks and their layout over nodes, from one source. */
    private record Layout(int rank, int count, int localRank, int localCount, int nodeRank, String source,
                          String slurmNodeList, String slurmJobId) {
    }

    private static Layout fromCommandLine(Explicit cli) {
        if (cli.rank() == null || cli.count() == null) {
            throw new IllegalArgumentException("give both --process-rank and --processes (or neither)");
        }
        int localCount = cli.localCount() != null ? cli.localCount() : cli.count();
        int localRank = cli.localRank() != null ? cli.localRank() : cli.rank() % localCount;
        int nodeRank = cli.nodeRank() != null ? cli.nodeRank() : cli.rank() / localCount;
        return new Layout(cli.rank(), cli.count(), localRank, localCount, nodeRank, "the command line", null, null);
    }

    /** torchrun (and Kubernetes training operators, which set RANK and WORLD_SIZE per pod). */
    private static Layout fromTorchrun(Function<String, String> var) {
        int rank = required(var, "RANK", "WORLD_SIZE");
        int count = required(var, "WORLD_SIZE", "RANK");
        int localCount = optional(var, "LOCAL_WORLD_SIZE", 1);
        int localRank = optional(var, "LOCAL_RANK", localCount == 1 ? 0 : rank % localCount);
        int nodeRank = optional(var, "GROUP_RANK", rank / localCount);
        return new Layout(rank, count, localRank, localCount, nodeRank, "torchrun's variables (RANK, WORLD_SIZE)",
                null, null);
    }

    private static Layout fromSlurm(Function<String, String> var) {
        int rank = required(var, "SLURM_PROCID", "SLURM_NTASKS");
        String ntasks = firstOf(var.apply("SLURM_NTASKS"), var.apply("SLURM_NPROCS"));
        if (ntasks == null) {
            throw new IllegalArgumentException("SLURM_PROCID is set but SLURM_NTASKS is not");
        }
        int count = parse("SLURM_NTASKS", ntasks);
        Integer nodeId = var.apply("SLURM_NODEID") == null ? null : parse("SLURM_NODEID", var.apply("SLURM_NODEID"));
        int localCount;
        if (var.apply("SLURM_NTASKS_PER_NODE") != null && var.apply("SLURM_NTASKS_PER_NODE").matches("\\d+")) {
            localCount = parse("SLURM_NTASKS_PER_NODE", var.apply("SLURM_NTASKS_PER_NODE"));
        } else if (var.apply("SLURM_TASKS_PER_NODE") != null) {
            localCount = tasksOnNode(var.apply("SLURM_TASKS_PER_NODE"), nodeId == null ? 0 : nodeId);
        } else {
            localCount = 1;
        }
        int localRank = optional(var, "SLURM_LOCALID", rank % localCount);
        int nodeRank = nodeId != null ? nodeId : rank / localCount;
        String nodes = firstOf(var.apply("SLURM_JOB_NODELIST"), var.apply("SLURM_NODELIST"));
        String jobId = firstOf(var.apply("SLURM_JOB_ID"), var.apply("SLURM_JOBID"));
        if (jobId != null && !jobId.matches("\\d{1,18}")) {
            throw new IllegalArgumentException("SLURM_JOB_ID '" + jobId + "' is not a job number");
        }
        return new Layout(rank, count, localRank, localCount, nodeRank, "Slurm's variables (SLURM_PROCID, SLURM_NTASKS)",
                nodes, jobId);
    }

    private static Layout fromOpenMpi(Function<String, String> var) {
        int rank = required(var, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
        int count = required(var, "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK");
        int localCount = optional(var, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
        int localRank = optional(var, "OMPI_COMM_WORLD_LOCAL_RANK", rank % localCount);
        return new Layout(rank, count, localRank, localCount, rank / localCount,
                "Open MPI's variables (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)", null, null);
    }

    /**
     * The tasks on node {@code node} from SLURM_TASKS_PER_NODE, whose form is a comma list of
     * "n" or "n(xk)" (k nodes with n tasks each): "2(x3),1" is 2, 2, 2, 1.
     */
    static int tasksOnNode(String tasksPerNode, int node) {
        int seen = 0;
        for (String part : tasksPerNode.split(",")) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+)(?:\\(x(\\d+)\\))?").matcher(part.trim());
            if (!m.matches()) {
                throw new IllegalArgumentException("SLURM_TASKS_PER_NODE '" + tasksPerNode + "' is not of the form"
                        + " 2(x3),1");
            }
            int tasks = Integer.parseInt(m.group(1));
            int nodes = m.group(2) == null ? 1 : Integer.parseInt(m.group(2));
            if (node < seen + nodes) {
                return tasks;
            }
            seen += nodes;
        }
        throw new IllegalArgumentException("SLURM_TASKS_PER_NODE '" + tasksPerNode + "' describes " + seen
                + " nodes but SLURM_NODEID is " + node);
    }

    private static int required(Function<String, String> var, String name, String partner) {
        String v = var.apply(name);
        if (v == null) {
            throw new IllegalArgumentException(partner + " is set but " + name + " is not: set both, or neither");
        }
        return parse(name, v);
    }

    private static int optional(Function<String, String> var, String name, int fallback) {
        String v = var.apply(name);
        return v == null ? fallback : parse(name, v);
    }

    private static int parse(String name, String value) {
        try {
            int v = Integer.parseInt(value);
            if (v < 0) {
                throw new NumberFormatException();
            }
            return v;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + "='" + value + "' is not a non-negative integer");
        }
    }

    private static String firstOf(String a, String b) {
        return a != null ? a : b;
    }

    @Override
    public String toString() {
        return "process " + rank + " of " + count + " (node " + nodeRank + ", local " + localRank + " of " + localCount
                + "), master " + masterAddr + ":" + masterPort + ", from " + source;
    }
}
