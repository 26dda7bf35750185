// A store that goes away (its process ended) or a peer that hangs up after its handshake is named
// by host:port and a reason in words: an end-of-stream has no message of its own, which used to
// read "(null)" in the one line the user gets.
package org.fsdp4j.dist;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.time.Duration;
import org.fsdp4j.comm.JobToken;
import org.fsdp4j.comm.RefusalLog;
import org.junit.jupiter.api.Test;

class StoreLossMessageTest {

    @Test
    void aStoreThatEndsIsNamedWithAReasonInWords() {
        JobToken token = JobToken.generate();
        StoreServer server = StoreServer.start(InetAddress.getLoopbackAddress(), 0, token, new RefusalLog(l -> { }));
        try (StoreClient client = StoreClient.connect("127.0.0.1", server.port(), Duration.ofSeconds(10), token)) {
            client.set("k", "v");
            server.close();         // as when process 0 ends: every connection is closed
            RendezvousException e = assertThrows(RendezvousException.class, () -> client.get("never", Duration.ofSeconds(5)));
            String m = e.getMessage();
            assertTrue(m.contains("127.0.0.1:" + server.port()), m);
            assertFalse(m.contains("null"), m);
            assertTrue(m.contains("closed the connection"), m);
        } finally {
            server.close();
        }
    }
}
