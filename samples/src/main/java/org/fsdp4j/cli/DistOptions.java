// The flags that place a process in a run of several (train and bench collectives), and what a
// command does with them: who this process is (the flags first, then torchrun's, Slurm's and Open
// MPI's variables: ProcessIdentity), how many ranks it runs, and joining the others
// (ProcessGroup: the rendezvous store, the settings check). Without any of them, and without
// those variables, a command runs alone, as it always did.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.io.Writer;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.fsdp4j.api.Device;
import org.fsdp4j.comm.TcpGroup;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import org.fsdp4j.dist.Settings;
import picocli.CommandLine.Option;

final class DistOptions {

    /** Settings a process may hold for itself: where process 0 writes, how many threads each takes. */
    static final Set<String> PER_PROCESS_SETTINGS = Set.of("outDir", "cpuThreads");

    @Option(names = "--process-rank", paramLabel = "R",
            description = "this process's index in a run of several (default: RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK)")
    Integer processRank;

    @Option(names = "--processes", paramLabel = "P",
            description = "processes in the run, each running --world-size / P ranks (default: WORLD_SIZE, SLURM_NTASKS"
                    + " or OMPI_COMM_WORLD_SIZE; none: this process runs alone)")
    Integer processes;

    @Option(names = "--master-addr", paramLabel = "HOST",
            description = "host of the process of rank 0, which serves the rendezvous store (default: MASTER_ADDR, the"
                    + " first host of SLURM_JOB_NODELIST, or 127.0.0.1 when every process is on this machine)")
    String masterAddr;

    @Option(names = "--master-port", paramLabel = "PORT",
            description = "port of the rendezvous store (default: MASTER_PORT, else 29500; under Slurm 29500 + job id mod 10000)")
    Integer masterPort;

    /**
     * Who this process is in a run of several, or empty when it runs alone. A run that may span
     * hosts without a job token stops here, before anything else (bad input: exit 1).
     */
    Optional<ProcessIdentity> identity() {
        Optional<ProcessIdentity> id = identity(System.getenv());
        id.ifPresent(ProcessIdentity::requireTokenAcrossHosts);
        return id;
    }

    Optional<ProcessIdentity> identity(Map<String, String> env) {
        return ProcessIdentity.resolve(new ProcessIdentity.Explicit(processRank, processes, null, null, null, masterAddr,
                masterPort), env).filter(id -> !id.alone());
    }

    /**
     * Joins the other processes of the run, checking that {@code settings} (the command's resolved
     * configuration record) are theirs too; waits up to {@code timeout} for them.
     */
    static ProcessGroup join(ProcessIdentity id, Record settings, Duration timeout) {
        return join(id, Settings.of(settings, PER_PROCESS_SETTINGS), timeout);
    }

    /** As above with the settings already flattened (Settings.of, plus what the command adds). */
    static ProcessGroup join(ProcessIdentity id, Map<String, String> settings, Duration timeout) {
        return ProcessGroup.join(id, settings, timeout);
    }

    /**
     * For commands that run in one process only (bench step, bench sharding): throws a usage error
     * when the environment makes this process one of several (fsdp4j launch, torchrun or Slurm set
     * RANK and WORLD_SIZE), instead of every process running the whole benchmark and all but one
     * failing on the shared --out.
     */
    static void requireAlone(String command, Map<String, String> env) {
        Optional<ProcessIdentity> id = new DistOptions().identity(env);   // no flags: the environment alone
        if (id.isPresent()) {
            throw new UserError(ExitCode.USAGE, command + " runs in one process (its --world-size ranks are threads of it),"
                    + " but this is process " + id.get().rank() + " of " + id.get().count() + " (identity from "
                    + id.get().source() + "): run it without launch, or time steps over several processes with"
                    + " 'fsdp4j launch ... -- train --steps N' (its log gives each step's time)");
        }
    }

    /** Where a process other than process 0 prints its run log: nowhere (its errors still go to stderr). */
    static PrintWriter quiet() {
        return new PrintWriter(Writer.nullWriter());
    }

    /**
     * The run's layout for the header: "2 processes x 2 ranks over TCP (shared memory within a host), master
     * 127.0.0.1:29500 (torchrun's variables)"; on GPUs "... over NCCL ...".
     */
    static String describe(ProcessIdentity id, int worldSize, Device device) {
        int k = worldSize / id.count();
        String transport = device.isCpu()
                ? " over TCP" + (TcpGroup.sharedMemoryByDefault() ? " (shared memory within a host)" : "")
                : " over NCCL (its unique ids through the rendezvous store)";
        return id.count() + " processes x " + k + (k == 1 ? " rank" : " ranks") + transport + ", master "
                + id.masterAddr() + ":" + id.masterPort() + " (identity from " + id.source() + ")";
    }
}
