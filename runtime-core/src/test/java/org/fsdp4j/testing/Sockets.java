// What the authentication tests ask of a refused connection, in one place: the tests of the store,
// of the peer listener and of a whole launched job all check it the same way.
package org.fsdp4j.testing;

import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;

public final class Sockets {

    private Sockets() {
    }

    /** Closed by the other side without an answer: an end of stream, or a reset (our bytes were left unread). */
    public static boolean closedWithoutAnswer(Socket s) throws IOException {
        s.setSoTimeout(10_000);
        try {
            return s.getInputStream().read() == -1;
        } catch (SocketException reset) {
            return String.valueOf(reset.getMessage()).contains("reset");
        }
    }
}
