// A kernel of our fatbin as the launchers see it: a name and a launch. ModuleKernel launches
// for real; tests substitute a recorder that checks each argument against the C signature.
package org.fsdp4j.cuda;

interface Kernel {

    String name();

    /**
     * Launches on {@code stream} with grid (gridX, gridY) and block (blockX, blockY). Arguments:
     * Integer → C int, Long → C long long or a device pointer, Float → C float.
     */
    void launch2d(CudaStream stream, long gridX, int gridY, int blockX, int blockY, int sharedBytes, Object... args);

    /** 1-D launch. */
    default void launch(CudaStream stream, long gridX, int blockX, Object... args) {
        launch2d(stream, gridX, 1, blockX, 1, 0, args);
    }

    /** A grid-stride kernel over {@code numel} elements: Grid.strided(numel) blocks of Grid.THREADS. */
    default void launchStrided(CudaStream stream, long numel, Object... args) {
        launch(stream, Grid.strided(numel), Grid.THREADS, args);
    }
}
