// The emulator-built kernels as the stand-in driver launches them: one entry per extern "C"
// kernel of src/main/cuda, whose trampoline reads the cuLaunchKernel argument array with the C
// types the kernel declares (as CUDA copies the values at launch) and says which arguments are
// device pointers and what alignment each needs (a typed pointer: its element; a void* buffer:
// the element size of the dtype code argument that goes with it, found from the sources).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <string>
#include <vector>

namespace standin {

struct PointerArgument {
    int index;
    uintptr_t value;
    size_t align;        // bytes
    std::string type;    // the C type, for messages
};

struct BoundKernel {
    std::function<void()> run;              // the kernel over one thread, values bound
    std::vector<PointerArgument> pointers;
    std::string error;                      // non-empty: the arguments cannot be bound
};

struct KernelEntry {
    const char* name;
    BoundKernel (*bind)(void** params);
};

extern const KernelEntry kernel_table[];
extern const size_t kernel_count;

const KernelEntry* find_kernel(const char* name);

// Runs a bound kernel over grid × block on the emulator, one launch at a time in the process;
// false with *error set when the emulator found a divergent barrier or warp call or a deadlock.
bool run_emulated(const char* name, unsigned gridX, unsigned gridY, unsigned blockX, unsigned blockY,
                  const std::function<void()>& run, std::string* error);

}  // namespace standin
