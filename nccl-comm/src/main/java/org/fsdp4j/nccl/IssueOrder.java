// How the collectives of a rank's several communicators (all-gather, reduce-scatter, all-reduce,
// each on its own stream) are kept from deadlocking each other on its GPU. NCCL kernels spin until
// their peers arrive: if one GPU starts communicator A's collective while another starts B's, and
// neither has room for the other's, both wait forever. fsdp4j's rule: every rank issues all its
// collectives from one thread in one order, the same on every rank (the engine's schedule is a
// function of the model and the step, nothing else), and each GPU launches them in that order.
// NCCL >= 2.26 does the launching in host order itself with NCCL_LAUNCH_ORDER_IMPLICIT=1, which
// fsdp4j's launch scripts set (IMPLICIT); where the variable is not set or NCCL is older, each
// collective's stream waits for the event after the rank's previous collective (CHAINED: the
// collectives of a rank then run one at a time, as they do on one communicator, FSDP2's layout).
// -Dfsdp4j.ncclIssueOrder=chained|implicit|unordered overrides the choice (unordered only for the
// test that shows the deadlock the rule prevents).
package org.fsdp4j.nccl;

import org.fsdp4j.backend.Fsdp4jSystemProperties;
import org.fsdp4j.backend.Backend;

final class IssueOrder {

    /** The first NCCL that launches in host order under NCCL_LAUNCH_ORDER_IMPLICIT. */
    static final int IMPLICIT_SINCE = 22600;

    enum Rule {
        IMPLICIT("NCCL's launch order (NCCL_LAUNCH_ORDER_IMPLICIT=1)"),
        CHAINED("chained in issue order (each after the rank's previous collective)"),
        UNORDERED("unordered (test only: may deadlock)");

        private final String description;

        Rule(String description) {
            this.description = description;
        }

        String describe() {
            return description;
        }
    }

    /** The rule for this process: the property, else IMPLICIT where NCCL will honour it, else CHAINED. */
    static Rule rule(NcclApi nccl) {
        String forced = Fsdp4jSystemProperties.ncclIssueOrder();
        switch (forced) {
            case "chained": return Rule.CHAINED;
            case "implicit": return Rule.IMPLICIT;
            case "unordered": return Rule.UNORDERED;
            case "": break;
            default:
                throw new IllegalArgumentException("-Dfsdp4j.ncclIssueOrder=" + forced + " is not chained, implicit or"
                        + " unordered");
        }
        int[] version = new int[1];
        boolean implicitAsked = "1".equals(System.getenv("NCCL_LAUNCH_ORDER_IMPLICIT"));
        return implicitAsked && nccl.version(version) == NcclApi.SUCCESS && version[0] >= IMPLICIT_SINCE
                ? Rule.IMPLICIT : Rule.CHAINED;
    }

    private final Rule rule;
    private Backend.Event last;      // after the rank's previous collective; only its issuing thread touches it

    IssueOrder(Rule rule) {
        this.rule = rule;
    }

    /** Before a collective is issued on {@code stream}: under CHAINED it waits for the rank's previous one. */
    synchronized void before(Backend.Stream stream) {
        if (rule == Rule.CHAINED && last != null) {
            stream.waitFor(last);
        }
    }

    /** After it was issued: {@code done} completes with it. */
    synchronized void after(Backend.Event done) {
        last = done;
    }
}
