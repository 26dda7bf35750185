// What ServiceLoader finds to connect ranks that sit on different devices of this machine (NCCL
// over several GPUs, in nccl-comm). Ranks on the CPU, or sharing one device, need none: the
// in-process group serves them (RankGroups). Providers must be cheap to construct and must not
// touch native libraries until asked.
package org.fsdp4j.comm;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.fsdp4j.api.Device;

public interface RankGroupProvider {

    /** In words, for messages ("NCCL"). */
    String name();

    /** Whether this provider connects ranks placed on {@code devices} (rank r on devices.get(r)). */
    boolean serves(List<Device> devices);

    /** Empty when usable here; otherwise why not (a library missing, no driver). */
    Optional<String> unavailableReason();

    /** The group of ranks on {@code devices}, each collective bounded by {@code timeout}. */
    RankGroup create(List<Device> devices, Duration timeout);
}
