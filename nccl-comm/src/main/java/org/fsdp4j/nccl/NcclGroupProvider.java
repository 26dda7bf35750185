// Lets RankGroups find NCCL through ServiceLoader for ranks on different GPUs: of this process, or
// of several processes and machines (bootstrapped through the rendezvous store). Cheap to
// construct; NCCL is probed only when asked.
package org.fsdp4j.nccl;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import org.fsdp4j.api.Device;
import org.fsdp4j.comm.ProcessDirectory;
import org.fsdp4j.comm.RankGroup;
import org.fsdp4j.comm.RankGroupProvider;

public final class NcclGroupProvider implements RankGroupProvider {

    @Override
    public String name() {
        return "NCCL";
    }

    /** Ranks each on a GPU of its own. */
    @Override
    public boolean serves(List<Device> devices) {
        return devices.stream().allMatch(d -> d.kind() == Device.Kind.CUDA) && new HashSet<>(devices).size() == devices.size();
    }

    @Override
    public Optional<String> unavailableReason() {
        return NcclProbe.unavailableReason();
    }

    @Override
    public RankGroup create(List<Device> devices, Duration timeout) {
        return NcclGroup.create(devices.size(), timeout);
    }

    @Override
    public RankGroup createAcrossProcesses(List<Device> localDevices, int worldSize, int firstRank,
                                           ProcessDirectory directory, String key, Duration timeout) {
        return NcclGroup.acrossProcesses(worldSize, firstRank, localDevices.size(), directory, key, timeout);
    }
}
