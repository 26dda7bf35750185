// What the collectives issued by this thread are for ("unit block.3"), so that a failure names it
// beside the operation and the rank: the engine tags a unit's all-gather and reduction while it
// issues them, and every communicator reads the tag when a collective is issued (the collective
// itself may run later, on a stream, where the issuing thread's state is gone).
package org.fsdp4j.comm;

public final class CommTag {

    private static final ThreadLocal<String> CURRENT = new ThreadLocal<>();

    /** Restores the previous tag when closed. */
    public interface Scope extends AutoCloseable {
        @Override
        void close();
    }

    private CommTag() {
    }

    /** Tags the collectives this thread issues until the scope is closed. */
    public static Scope of(String tag) {
        String previous = CURRENT.get();
        CURRENT.set(tag);
        return () -> {
            if (previous == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(previous);
            }
        };
    }

    /** " (unit block.3)" for a label, or "" when nothing is tagged. */
    static String suffix() {
        String t = CURRENT.get();
        return t == null ? "" : " (" + t + ")";
    }
}
