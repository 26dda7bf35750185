// The emulator's launch entry point, as the runner and the stand-in CUDA driver see it: run one
// kernel over a grid under a schedule (the order in which threads and blocks are taken, the
// shared-memory poison byte). A divergent barrier or warp call, or a deadlock, cannot be unwound:
// without a LaunchError the runner's way applies (reported on stderr, the process ends with
// EXIT_DIVERGENT); with one (the stand-in, inside a JVM) the launch returns false, the block's
// fibers are abandoned where they stand (never resumed, their stacks never reused) and the
// emulator is ready for the next launch.
#pragma once

#include <functional>
#include <string>

#include <stdint.h>

namespace emu {

constexpr int EXIT_PLAN = 2;        // the plan or the emulator's own use is wrong
constexpr int EXIT_DIVERGENT = 3;   // divergent __syncthreads / warp call, or a deadlock
constexpr int EXIT_ORDER = 4;       // results differ between schedules

enum class Order { ASCENDING, DESCENDING, RANDOM };

struct Schedule {
    std::string name;
    Order order;              // threads within a block, and blocks within the grid
    unsigned stridedBlocks;   // > 0: grid-stride launches run on this many blocks instead
    uint64_t seed;            // for RANDOM orders (reshuffled every pass)
    unsigned char poison;     // every byte of __shared__ memory at each block's start
};

struct Dim {
    unsigned x, y;
};

// Why a launch failed: one of the EXIT_* codes and the report the runner would print.
struct LaunchError {
    int code = 0;
    std::string what;
};

// Runs body once per thread of every block of grid, with threadIdx/blockIdx/... set. Returns
// true; on a failure, false with *error filled, or (error == nullptr) the process ends. Not
// reentrant: one launch at a time in the process (the stand-in serialises its streams' launches).
bool launch(const std::string& kernel, Dim grid, Dim block, const Schedule& schedule,
            const std::function<void()>& body, LaunchError* error = nullptr);

}  // namespace emu
