// What ServiceLoader finds to connect ranks that sit on different devices (NCCL over several GPUs,
// in nccl-comm): the ranks of this process, or this process's share of ranks spread over several
// processes and machines. Ranks on the CPU, or sharing one device, need none: the in-process group
// and the TCP group serve them (RankGroups). Providers must be cheap to construct and must not
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

    /**
     * This process's share of a world of {@code worldSize} ranks spread over the processes of
     * {@code directory}: ranks {@code firstRank} .. firstRank + localDevices.size() − 1, rank
     * firstRank + l on {@code localDevices.get(l)}. {@code key} names the group alike in every
     * process (what the processes meet under in the store); each collective is bounded by
     * {@code timeout}. Collective over the processes: every process calls it for its share.
     */
    default RankGroup createAcrossProcesses(List<Device> localDevices, int worldSize, int firstRank,
                                            ProcessDirectory directory, String key, Duration timeout) {
        throw new IllegalArgumentException(name() + " does not connect ranks across processes");
    }
}
