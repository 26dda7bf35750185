// Why a connection failed, in words for the one line a user gets. Several of the JDK's exceptions
// carry no message (an end of stream: EOFException; some refused or unreachable connects), and
// their getMessage() printed as "null" in the middle of a sentence; the class then says what
// happened.
package org.fsdp4j.comm;

import java.io.EOFException;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.PortUnreachableException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.channels.ClosedChannelException;

public final class NetReasons {

    private NetReasons() {
    }

    /** {@code e}'s message, or, when it has none, what its kind of failure means ("the other end closed the connection"). */
    public static String of(Throwable e) {
        if (e == null) {
            return "no reason given";
        }
        String m = e.getMessage();
        if (m != null && !m.isBlank()) {
            return m;
        }
        if (e instanceof EOFException) {
            return "the other end closed the connection";
        }
        if (e instanceof ConnectException) {
            return "connection refused: nothing listens there";
        }
        if (e instanceof NoRouteToHostException) {
            return "no route to the host";
        }
        if (e instanceof PortUnreachableException) {
            return "the port is unreachable";
        }
        if (e instanceof SocketTimeoutException) {
            return "timed out";
        }
        if (e instanceof UnknownHostException) {
            return "the name does not resolve to an address";
        }
        if (e instanceof ClosedChannelException) {
            return "the connection was already closed";
        }
        return e.getCause() != null && e.getCause() != e ? of(e.getCause()) : e.getClass().getSimpleName();
    }
}
