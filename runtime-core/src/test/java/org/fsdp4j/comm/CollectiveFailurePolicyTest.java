// The one failure policy of the host-side collectives (HostCommunicator.guarded), the same in
// the in-process group and across processes: whatever fails inside a collective's body aborts
// the whole group at once, with that failure as the cause, so that no other rank waits for the
// timeout. That covers a CommException raised there (a transport's own: a lost peer, a frame
// that does not match) as much as a bug; the rendezvous's timeouts abort the group themselves.
package org.fsdp4j.comm;

import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;
import org.junit.jupiter.api.Test;

class CollectiveFailurePolicyTest {

    private static final String WHERE = "allReduce #1 on 'world' at rank 0";

    @Test
    void aCommExceptionInsideAnInProcessCollectiveAbortsTheGroup() {
        LocalGroup group = new LocalGroup(2, Duration.ofSeconds(20));
        assertACommExceptionAbortsTheGroup(group);
    }

    @Test
    void aCommExceptionInsideACollectiveAcrossProcessesAbortsTheGroup() {
        TcpTestSupport.onProcesses(1, 1, Duration.ofSeconds(20), (pg, group) -> {
            assertACommExceptionAbortsTheGroup(group);
            return List.of();
        });
    }

    /** Rank 0's collective body throws a CommException; the others would wait for rank 0 until the timeout. */
    private static void assertACommExceptionAbortsTheGroup(RankGroup group) {
        try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("rank 0"), new BackendOptions(1, true));
             Communicator world = group.communicator(0, backend)) {
            CommException lost = new CommException(WHERE + ": lost the connection to rank 1");
            CommException thrown = assertThrows(CommException.class, () -> ((HostCommunicator) world).guarded(WHERE, () -> {
                throw lost;
            }));
            assertSame(lost, thrown);
            assertTrue(group.isAborted(), "the group goes on; its other ranks would wait for rank 0 until the timeout");
            assertSame(lost, group.abortCause());
        }
    }
}
