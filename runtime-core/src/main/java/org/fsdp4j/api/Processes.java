// A run over several processes, as the library sees it: this process's place in the run (from
// torchrun's, Slurm's or Open MPI's variables) and the connection to the others. Fsdp.shard
// takes one to run this process's share of the ranks; the processes agree on when to stop.
package org.fsdp4j.api;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;

/**
 * This process's membership in a run over several processes. Start every process with
 * {@code fsdp4j launch}, torchrun, {@code srun} or {@code mpirun}; each calls
 * {@link #fromEnvironment} and passes the result to {@link Fsdp#shard(ModelFactory, FsdpOptions, Processes)}
 * with the same options and the same batches: each process then runs
 * {@code worldSize / processCount()} of the ranks.
 *
 * <pre>{@code
 * try (Processes processes = Processes.fromEnvironment(Map.of("lr", "3e-4"), Duration.ofMinutes(5)).orElseThrow();
 *      ShardedModel model = Fsdp.shard(factory, options, processes)) { ... }
 * }</pre>
 */
public final class Processes implements AutoCloseable {

    /**
     * A joined run as the engine holds it (its rendezvous and connections); the engine implements
     * it, a program never does.
     */
    public interface Membership extends AutoCloseable {

        /** @return this process's index in the run */
        int process();

        /** @return processes in the run */
        int processCount();

        /** @return processes of the run on this machine */
        int processesOnThisMachine();

        /**
         * The stop vote of {@link Processes#agreeToStop}.
         *
         * @param step   the step just completed
         * @param reason why this process wants to stop, or null
         * @return the agreed reason, or null to go on
         */
        String agreeToStop(int step, String reason);

        /** Leaves the run. */
        @Override
        void close();
    }

    private final Membership group;
    private final boolean owned;

    private Processes(Membership group, boolean owned) {
        this.group = group;
        this.owned = owned;
    }

    /**
     * Joins the run this process's environment describes (torchrun's RANK, WORLD_SIZE,
     * LOCAL_RANK, MASTER_ADDR, MASTER_PORT; Slurm's SLURM_PROCID and node list; Open MPI's
     * OMPI_COMM_WORLD_* variables), waiting for every process. The job's token comes from
     * FSDP4J_JOB_TOKEN or the file FSDP4J_JOB_TOKEN_FILE names; a run whose master address is not
     * this host's loopback needs one (docs/processes.md).
     *
     * @param settings what every process must agree on (name to value); a difference fails every process naming it
     * @param timeout  how long to wait for the other processes
     * @return the membership, or empty when the environment describes no run over several processes
     * @throws RuntimeException when the run cannot form (a RendezvousException) or its processes
     *                          disagree on a setting (a ConfigMismatchException), saying which
     */
    public static Optional<Processes> fromEnvironment(Map<String, String> settings, Duration timeout) {
        return FsdpRuntime.get().join(Map.copyOf(settings), timeout).map(m -> new Processes(m, true));
    }

    /**
     * A run the caller has joined already (the command line does, comparing its whole
     * configuration); closing the result leaves the group open.
     *
     * @param group the joined run, as the engine holds it
     * @return the membership
     */
    public static Processes of(Membership group) {
        return new Processes(group, false);
    }

    /**
     * This process's index in the run.
     *
     * @return 0 .. processCount() - 1
     */
    public int processIndex() {
        return group.process();
    }

    /**
     * Processes in the run.
     *
     * @return the count
     */
    public int processCount() {
        return group.processCount();
    }

    /**
     * Processes of the run on this machine (they share its cores).
     *
     * @return the count
     */
    public int processesOnThisMachine() {
        return group.processesOnThisMachine();
    }

    /**
     * Whether the run stops after step {@code step}: every process calls it at the same step
     * boundary with the reason it was asked to stop (a signal's name), or null; all get the
     * same answer, the first reason given, or null to go on.
     *
     * @param step   the step just completed
     * @param reason why this process wants to stop, or null
     * @return the agreed reason, or null to go on
     */
    public String agreeToStop(int step, String reason) {
        return group.agreeToStop(step, reason);
    }

    /**
     * The joined run as the engine holds it (for the engine).
     *
     * @return the membership
     */
    public Membership membership() {
        return group;
    }

    /** Leaves the run (when this object joined it). */
    @Override
    public void close() {
        if (owned) {
            group.close();
        }
    }

    @Override
    public String toString() {
        return "Processes[" + processIndex() + " of " + processCount() + "]";
    }
}
