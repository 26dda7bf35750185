// Several "processes" in this JVM, each a real ProcessGroup (its own store client, listener and
// connections; process 0 serves the store) with its share of a TcpGroup, their ranks on
// threads with CPU backends (debug streams, as CommTestSupport's): the bytes between the
// processes go through shared-memory rings, as between processes of one host, or (sharedMemory
// false) through TCP on localhost, as they would between machines. Every connection proves a
// job token, as a launched job's do. Results come back in
// world rank order. The tests with real child processes are in samples (MultiProcessTrainTest).
package org.fsdp4j.comm;

import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.fsdp4j.dist.JobAccess;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;

final class TcpTestSupport {

    /** What one simulated process does with its group (its ranks' outcomes, or its failure). */
    @FunctionalInterface
    interface ProcessBody<T> {
        List<T> run(ProcessGroup process, TcpGroup group) throws Exception;
    }

    private TcpTestSupport() {
    }

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@code processes} processes, {@code worldSize} ranks in all, each rank running {@code body}. */
    static <T> List<T> onRanks(int processes, int worldSize, Duration timeout, CommTestSupport.RankTest<T> body) {
        return onRanks(processes, worldSize, timeout, true, body);
    }

    /** As above; {@code sharedMemory}: whether processes may use shared-memory rings (else every byte goes over TCP). */
    static <T> List<T> onRanks(int processes, int worldSize, Duration timeout, boolean sharedMemory,
                               CommTestSupport.RankTest<T> body) {
        return onProcesses(processes, worldSize, timeout, sharedMemory, (pg, group) -> LocalLauncher.run(group, rank -> {
            try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("rank " + rank),
                    new BackendOptions(1, true));
                 Communicator world = group.communicator(rank, backend)) {
                return body.run(rank, backend, world);
            }
        }));
    }

    /**
     * Runs {@code body} once per simulated process (on a thread each) and returns every rank's
     * result in world order; the first process's failure is rethrown as it was thrown.
     */
    static <T> List<T> onProcesses(int processes, int worldSize, Duration timeout, ProcessBody<T> body) {
        return onProcesses(processes, worldSize, timeout, true, body);
    }

    /** As above; {@code sharedMemory} is each group's setting before {@code body} runs. */
    static <T> List<T> onProcesses(int processes, int worldSize, Duration timeout, boolean sharedMemory,
                                   ProcessBody<T> body) {
        int port = freePort();
        JobToken token = JobToken.generate();
        ExecutorService pool = Executors.newFixedThreadPool(processes);
        try {
            List<Future<List<T>>> futures = new ArrayList<>();
            for (int p = 0; p < processes; p++) {
                ProcessIdentity id = new ProcessIdentity(p, processes, p, processes, 0, "127.0.0.1", port, "a test")
                        .withAccess(JobAccess.NONE.withToken(token));
                futures.add(pool.submit(() -> {
                    try (ProcessGroup pg = ProcessGroup.join(id, Map.of(), Duration.ofSeconds(30))) {
                        TcpGroup group = pg.ranks(worldSize, timeout);
                        group.sharedMemory(sharedMemory);
                        return body.run(pg, group);
                    }
                }));
            }
            List<T> all = new ArrayList<>();
            RuntimeException first = null;
            for (Future<List<T>> f : futures) {
                try {
                    all.addAll(f.get());
                } catch (ExecutionException e) {
                    if (first == null) {
                        first = e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            }
            if (first != null) {
                throw first;
            }
            return all;
        } finally {
            pool.shutdownNow();
        }
    }
}
