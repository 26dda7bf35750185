// A decorator that makes every collective take a fixed latency longer, as a slow link would:
// the latency is stream work (a host function that sleeps, queued just before the collective),
// so a step that waits on each all-gather pays it every time, and a step that prefetches hides it
// behind compute. Used to show overlap is real without a network.
package org.fsdp4j.comm;

import java.time.Duration;
import org.fsdp4j.backend.Backend;

public final class LatencyCommunicator extends ForwardingCommunicator {

    private final Duration latency;

    public LatencyCommunicator(Communicator inner, Duration latency) {
        super(inner);
        if (latency.isNegative()) {
            throw new IllegalArgumentException("latency must be >= 0, got " + latency);
        }
        this.latency = latency;
    }

    @Override
    protected void collective(CommOp op, Backend.Stream stream, Runnable call) {
        stream.launchHostFunc(() -> {
            try {
                Thread.sleep(latency.toMillis(), latency.toNanosPart() % 1_000_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException("communicator '" + name() + "' at rank " + rank()
                        + ": interrupted during its link latency");
            }
        });
        call.run();
    }

    @Override
    public Communicator split(int color, int key, String name) {
        return new LatencyCommunicator(inner.split(color, key, name), latency);
    }
}
