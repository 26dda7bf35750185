// What a TcpGroup needs to know about the run's processes, answered by the rendezvous store
// (dist.ProcessGroup): which process this is, where each process listens for its peers, and
// the reason the run was aborted, which the first process to abort leaves for the others so that
// every process reports the same cause (a process that was killed leaves none: its peers then
// report the lost connection).
package org.fsdp4j.comm;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Optional;

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
}
