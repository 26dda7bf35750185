// Shared by the communicator tests: N ranks on N threads, each with its own CPU backend
// (one thread, so the ranks share the cores; debug streams, so every collective runs on a
// stream worker after a random delay, as it would beside a GPU) and its world communicator;
// fresh random data per run, rounded to the dtype under test so the reference sees exactly what
// the ranks hold. Collectives go on the compute stream unless a test needs another.
package org.fsdp4j.comm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.fsdp4j.api.DType;
import org.fsdp4j.api.Device;
import org.fsdp4j.api.MemoryCategory;
import org.fsdp4j.api.MemoryTracker;
import org.fsdp4j.api.Tensor;
import org.fsdp4j.backend.Backend;
import org.fsdp4j.backend.BackendOptions;
import org.fsdp4j.backend.Backends;

final class CommTestSupport {

    @FunctionalInterface
    interface RankTest<T> {
        T run(int rank, Backend backend, Communicator world) throws Exception;
    }

    private CommTestSupport() {
    }

    static <T> List<T> onRanks(LocalGroup group, RankTest<T> body) {
        return LocalLauncher.run(group, rank -> {
            try (Backend backend = Backends.create(Device.CPU, new MemoryTracker("rank " + rank),
                    new BackendOptions(1, true));
                 Communicator world = group.communicator(rank, backend)) {
                return body.run(rank, backend, world);
            }
        });
    }

    static <T> List<T> onRanks(int n, RankTest<T> body) {
        return onRanks(new LocalGroup(n, Duration.ofSeconds(20)), body);
    }

    static <T> List<T> onRanks(int n, LocalGroup.Dispatch dispatch, RankTest<T> body) {
        return onRanks(new LocalGroup(n, Duration.ofSeconds(20), dispatch), body);
    }

    /** Waits on the host for the collectives issued on the compute stream (their failure is rethrown here). */
    static void sync(Backend backend) {
        backend.computeStream().synchronize();
    }

    /** data[rank][i]: random values in [-1, 1) rounded to dtype. */
    static float[][] randomPerRank(Random random, int ranks, int numel, DType dtype) {
        float[][] data = new float[ranks][numel];
        for (int r = 0; r < ranks; r++) {
            for (int i = 0; i < numel; i++) {
                data[r][i] = dtype.round(random.nextFloat() * 2 - 1);
            }
        }
        return data;
    }

    static Tensor tensorOf(Backend backend, DType dtype, float[] values) {
        Tensor t = backend.allocate(dtype, MemoryCategory.WORKSPACE, values.length);
        backend.copyFromHost(values, 0, t);
        return t;
    }

    /** The local group's arithmetic: fp32 sum in rank order, one multiply, one rounding. */
    static float reduceLikeTheGroup(float[][] data, int i, float scale, DType dtype) {
        float acc = data[0][i];
        for (int q = 1; q < data.length; q++) {
            acc += data[q][i];
        }
        if (scale != 1f) {
            acc *= scale;
        }
        return dtype.round(acc);
    }

    /** The fp64 sum of element i over ranks. */
    static double exactSum(float[][] data, int i) {
        double s = 0;
        for (float[] d : data) {
            s += d[i];
        }
        return s;
    }

    /** Names of live threads this project started (communicator streams, rank threads, CPU pools). */
    static List<String> liveProjectThreads() throws InterruptedException {
        List<String> names = new ArrayList<>();
        for (int attempt = 0; attempt < 50; attempt++) {   // threads that were told to stop get 1 s to exit
            names.clear();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.isAlive() && t.getName().startsWith("fsdp4j-")) {
                    names.add(t.getName());
                }
            }
            if (names.isEmpty()) {
                break;
            }
            Thread.sleep(20);
        }
        return names;
    }
}
