// Picks how the ranks of this process talk, from where they sit: CPU ranks are an in-process
// group whose collectives are host functions on their streams; ranks that share one device an
// in-process group whose streams trade events; ranks on different devices whatever provider
// serves them (NCCL for several GPUs), found with ServiceLoader, or a clear error naming what
// is missing. Ranks spread over processes: CPU ranks are a TCP group, GPU ranks the provider's
// group across processes (NCCL, bootstrapped through the rendezvous store).
package org.fsdp4j.comm;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.ServiceLoader;
import org.fsdp4j.api.Device;

public final class RankGroups {

    private RankGroups() {
    }

    /**
     * This process's share of a world of {@code worldSize} ranks over the processes of {@code
     * directory}, K = worldSize / processes each: rank firstRank + l on {@code localDevices.get(l)}.
     * {@code key} names the group alike in every process.
     */
    public static RankGroup acrossProcesses(List<Device> localDevices, int worldSize, ProcessDirectory directory,
                                            String key, Duration timeout) {
        if (localDevices.stream().allMatch(Device::isCpu)) {
            return new TcpGroup(key, worldSize, directory, timeout);
        }
        if (localDevices.stream().anyMatch(Device::isCpu)) {
            throw new IllegalArgumentException("ranks on the CPU and on GPUs cannot form one group: " + localDevices);
        }
        int processes = directory.processCount();
        if (worldSize % processes != 0 || worldSize / processes != localDevices.size()) {
            throw new IllegalArgumentException("--world-size " + worldSize + " does not split over " + processes
                    + " processes as " + localDevices.size() + " ranks each: use --world-size "
                    + processes * localDevices.size());
        }
        if (new HashSet<>(localDevices).size() != localDevices.size()) {
            throw new IllegalArgumentException("the " + localDevices.size() + " ranks of this process would share "
                    + localDevices + ": across processes each rank needs a GPU of its own (NCCL refuses two ranks on"
                    + " one GPU); use --device cuda");
        }
        RankGroupProvider p = provider(localDevices, "GPU ranks across processes need NCCL (nccl-comm)", "");
        return p.createAcrossProcesses(localDevices, worldSize, directory.process() * localDevices.size(), directory, key,
                timeout);
    }

    /** The group for ranks placed on {@code devices} (rank r on devices.get(r)). */
    public static RankGroup forDevices(List<Device> devices, Duration timeout) {
        if (devices.isEmpty()) {
            throw new IllegalArgumentException("a group needs at least one rank");
        }
        if (devices.stream().allMatch(Device::isCpu)) {
            return new LocalGroup(devices.size(), timeout, LocalGroup.Dispatch.HOST_FUNCTIONS);
        }
        if (new HashSet<>(devices).size() == 1) {
            return new LocalGroup(devices.size(), timeout, LocalGroup.Dispatch.STREAM_EVENTS);
        }
        if (devices.stream().anyMatch(Device::isCpu)) {
            throw new IllegalArgumentException("ranks on the CPU and on GPUs cannot form one group: " + devices);
        }
        return provider(devices, devices.size() + " ranks on " + devices + " need a communicator between GPUs (NCCL, in"
                + " nccl-comm)", "; to run several ranks on one GPU, name it: --device cuda:0").create(devices, timeout);
    }

    /**
     * The first provider that serves {@code devices} and is usable here; else an
     * IllegalArgumentException of {@code need}, why each serving provider is not usable (or that
     * none is on the class path), and {@code hint}.
     */
    private static RankGroupProvider provider(List<Device> devices, String need, String hint) {
        StringBuilder why = new StringBuilder();
        for (RankGroupProvider p : ServiceLoader.load(RankGroupProvider.class)) {
            if (!p.serves(devices)) {
                continue;
            }
            Optional<String> reason = p.unavailableReason();
            if (reason.isEmpty()) {
                return p;
            }
            why.append("; ").append(p.name()).append(" is not usable: ").append(reason.get());
        }
        throw new IllegalArgumentException(need + (why.length() == 0 ? ", which is not on the class path" : why) + hint);
    }
}
