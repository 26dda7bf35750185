// A peer that passes the job's handshake and hangs up before it accepts the connection is named
// with a reason in words, never "null" (an end-of-stream has no message of its own).
package org.fsdp4j.comm;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class PeerLossMessageTest {

    @Test
    void aPeerThatHangsUpAfterTheHandshakeIsNamedWithAReasonInWords() throws Exception {
        JobToken token = JobToken.generate();
        try (ServerSocket peer = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             PeerListener here = PeerListener.open(1, token, InetAddress.getLoopbackAddress(), new RefusalLog(l -> { }))) {
            Thread t = new Thread(() -> {
                try (Socket s = peer.accept()) {
                    Handshake.accept(s, token, Handshake.Kind.PEER, Handshake.ACCEPT_LIMIT);
                } catch (Exception ignored) {
                    // the test reads what the connecting side says
                }
            });
            t.start();
            InetSocketAddress at = new InetSocketAddress(InetAddress.getLoopbackAddress(), peer.getLocalPort());
            CommException e = assertThrows(CommException.class,
                    () -> here.connect(at, "g1", 0, 1, Duration.ofSeconds(5)));
            t.join();
            String m = e.getMessage();
            assertFalse(m.contains("null"), m);
            assertTrue(m.contains(at.toString()) && m.contains("closed the connection"), m);
        }
    }
}
