// Who may join this process's job, and on which addresses it listens: the job's token and the two
// bind settings. It exists beside ProcessIdentity (which says who this process is) because these
// come from the environment of every launcher alike, and ProcessGroup needs them before it opens
// a port. Its toString never shows the token.
package org.fsdp4j.dist;

import java.util.Map;
import org.fsdp4j.comm.JobToken;

/**
 * @param token     the job's token (JobToken.NONE: none given)
 * @param storeBind where process 0 serves the store (FSDP4J_STORE_BIND), or null: the master address
 * @param peerBind  where each process listens for its peers (FSDP4J_PEER_BIND), or null: the
 *                  interface it reaches the store through
 */
public record JobAccess(JobToken token, String storeBind, String peerBind) {

    /** The variable that overrides where process 0 serves the store ("0.0.0.0": every interface). */
    public static final String STORE_BIND_VARIABLE = "FSDP4J_STORE_BIND";
    /** The variable that overrides where each process listens for its peers ("0.0.0.0": every interface). */
    public static final String PEER_BIND_VARIABLE = "FSDP4J_PEER_BIND";

    /** No token, the default addresses. */
    public static final JobAccess NONE = new JobAccess(JobToken.NONE, null, null);

    public JobAccess {
        if (token == null) {
            throw new IllegalArgumentException("a job's access needs a token, or JobToken.NONE");
        }
    }

    /** What {@code env} gives; IllegalArgumentException when the token is given but unusable (JobToken.fromEnvironment). */
    public static JobAccess fromEnvironment(Map<String, String> env) {
        return new JobAccess(JobToken.fromEnvironment(env).orElse(JobToken.NONE), nonBlank(env.get(STORE_BIND_VARIABLE)),
                nonBlank(env.get(PEER_BIND_VARIABLE)));
    }

    /** The same with {@code t} as the token. */
    public JobAccess withToken(JobToken t) {
        return new JobAccess(t, storeBind, peerBind);
    }

    private static String nonBlank(String v) {
        return v == null || v.isBlank() ? null : v.strip();
    }
}
