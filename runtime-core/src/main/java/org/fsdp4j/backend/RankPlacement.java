// Which device each rank of this process runs on. On the CPU every rank shares the host. On GPUs
// "--device cuda" gives rank r the r-th visible GPU (the ranks then need NCCL between them), and
// "--device cuda:i" puts every rank on GPU i (they share it through the in-process group: for
// tests and trials, as one GPU cannot run NCCL between ranks of its own). A process of a run over
// several runs K ranks: on GPUs it takes the K GPUs of its place on the node (local process i takes
// GPUs iK .. iK+K−1, as torchrun's LOCAL_RANK picks GPU i for one rank a process), or, when it sees
// only K GPUs (Slurm's --gpus-per-task, CUDA_VISIBLE_DEVICES set per process), those.
package org.fsdp4j.backend;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.fsdp4j.api.Device;

public final class RankPlacement {

    private RankPlacement() {
    }

    /**
     * Rank r's device, for {@code worldSize} ranks asked for with --device {@code requested}
     * (as given: "auto", "cpu", "cuda" or "cuda:i"), which resolved to {@code resolved}.
     */
    public static List<Device> place(String requested, Device resolved, int worldSize) {
        boolean everyGpu = resolved.kind() == Device.Kind.CUDA && !requested.contains(":");
        if (!everyGpu || worldSize == 1) {
            return Collections.nCopies(worldSize, resolved);
        }
        int visible = Backends.provider(Device.Kind.CUDA).map(BackendProvider::deviceCount).orElse(0);
        if (worldSize > visible) {
            throw new IllegalArgumentException("--world-size " + worldSize + " on --device " + requested + " runs one rank"
                    + " per GPU, but " + visible + (visible == 1 ? " GPU is" : " GPUs are") + " visible: use --world-size "
                    + visible + ", or --device cuda:0 to run " + worldSize + " ranks on one GPU (for tests and trials)");
        }
        List<Device> devices = new ArrayList<>();
        for (int r = 0; r < worldSize; r++) {
            devices.add(Device.cuda(r));
        }
        return devices;
    }

    /**
     * The devices of this process's {@code perProcess} ranks in a run over several processes, local
     * rank l on element l: this process is the {@code localProcess}-th of {@code localProcesses}
     * on its node.
     */
    public static List<Device> placeLocal(String requested, Device resolved, int perProcess, int localProcess,
                                          int localProcesses) {
        if (resolved.isCpu()) {
            return Collections.nCopies(perProcess, resolved);
        }
        if (requested.contains(":")) {
            if (perProcess > 1) {
                throw new IllegalArgumentException("--device " + requested + " puts this process's " + perProcess
                        + " ranks on one GPU, but ranks of several processes talk through NCCL, which needs a GPU per"
                        + " rank: use --device cuda");
            }
            return List.of(resolved);
        }
        int visible = Backends.provider(Device.Kind.CUDA).map(BackendProvider::deviceCount).orElse(0);
        int first;
        if (visible >= localProcesses * perProcess) {
            first = localProcess * perProcess;          // every process of the node sees all its GPUs
        } else if (visible >= perProcess) {
            first = 0;                                  // each process sees only its own
        } else {
            throw new IllegalArgumentException("this process runs " + perProcess + (perProcess == 1 ? " rank" : " ranks")
                    + " on --device " + requested + ", one per GPU, but " + visible + (visible == 1 ? " GPU is" : " GPUs are")
                    + " visible: use --world-size " + visible + " x processes, or give each process its GPUs");
        }
        List<Device> devices = new ArrayList<>();
        for (int l = 0; l < perProcess; l++) {
            devices.add(Device.cuda(first + l));
        }
        return devices;
    }
}
