// The emulator's launch entry point, as the runner sees it: run one kernel over a grid under a
// schedule (the order in which threads and blocks are taken, the shared-memory poison byte).
// A divergent barrier or warp call, or a deadlock, is reported on stderr and ends the process
// with EXIT_DIVERGENT: a kernel in that state cannot be unwound.
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

// Runs body once per thread of every block of grid, with threadIdx/blockIdx/... set.
void launch(const std::string& kernel, Dim grid, Dim block, const Schedule& schedule,
            const std::function<void()>& body);

}  // namespace emu
