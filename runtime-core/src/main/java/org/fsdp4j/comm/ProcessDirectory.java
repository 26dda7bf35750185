// What a group of ranks spread over processes (the TCP group, NCCL across processes) needs to know
// about the run's processes, answered by the rendezvous store (dist.ProcessGroup): which process
// this is, where each process listens for its peers and on which host it runs, bytes that process
// 0 makes and every process reads (NCCL's unique ids), and why the run cannot go on: the reason
// the first process to abort left for the others, so that every process reports the same cause,
// or, for a process that was killed and left none, that it ended without a word.
package org.fsdp4j.comm;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

public interface ProcessDirectory {

    /** This process's index, 0 ≤ process() < processCount(). */
    int process();

    int processCount();

    /** Where this process accepts its peers' connections. */
    PeerListener listener();

    /** Where process {@code process} accepts connections (waits up to {@code timeout} for it to say). */
    InetSocketAddress addressOf(int process, Duration timeout);

    /**
     * Leaves {@code reason} as the run's abort reason unless another process left one first;
     * returns the reason that stands. Best effort and quick: when the store is gone, {@code reason}.
     */
    String publishAbort(String reason);

    /** The abort reason some process left, if any; quick, empty when the store is gone. */
    Optional<String> publishedAbort();

    /** The host process {@code process} runs on, as it named itself when it joined. */
    String hostOf(int process);

    /** "process 1 (ranks 2-3, host node7)": how messages name a process (its ranks once they are known). */
    String describe(int process);

    /** "rank 2 (process 1, host node7)": how messages name a rank of a world of {@code ranksPerProcess} per process. */
    default String describeRank(int rank, int ranksPerProcess) {
        int process = rank / ranksPerProcess;
        return "rank " + rank + " (process " + process + ", host " + hostOf(process) + ")";
    }

    /**
     * Why the run cannot go on, if the store tells: the abort reason a process left, a process that
     * ended without a word (its connection to the store closed), or the store itself gone (process 0
     * ended). Quick (a few store reads); empty while every process is there.
     */
    Optional<String> failure();

    /**
     * As {@link #failure()}, asked again ten times a second for up to {@code wait} while it says
     * nothing: after a peer's connection ended, the store marks its process dead a moment later.
     */
    default Optional<String> failureWithin(Duration wait) {
        long deadline = System.nanoTime() + wait.toNanos();
        while (true) {
            Optional<String> why = failure();
            if (why.isPresent() || System.nanoTime() > deadline) {
                return why;
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return Optional.empty();
            }
        }
    }

    /**
     * The other processes whose heartbeat (a counter each process's own thread bumps twice a second
     * in the store) did not move over {@code window}: stopped (SIGSTOP) or frozen. Takes {@code
     * window}; empty when the store cannot tell.
     */
    List<Integer> stalledProcesses(Duration window);

    /**
     * ": process 1 (ranks 2-3, host h) stopped answering (no heartbeat for 2 s)" for the processes
     * stalledProcesses finds over 2 s, to end a timeout's message; "" when every heartbeat moves.
     */
    default String stalledSuffix() {
        List<Integer> stalled = stalledProcesses(Duration.ofSeconds(2));
        if (stalled.isEmpty()) {
            return "";
        }
        List<String> named = new ArrayList<>();
        stalled.forEach(q -> named.add(describe(q)));
        return ": " + String.join(", ", named) + " stopped answering (no heartbeat for 2 s)";
    }

    /**
     * The bytes process 0 makes with {@code make} and every process reads, under {@code key}
     * (each key once per run): waits up to {@code timeout}, and fails at once (CommException) when
     * {@link #failure()} tells why they will not come.
     */
    byte[] agreeOn(String key, Supplier<byte[]> make, Duration timeout);
}
