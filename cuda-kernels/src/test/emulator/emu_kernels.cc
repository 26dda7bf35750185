// The kernels under test, compiled as C++: the unity file that build-fatbin.sh's write-unity.sh
// makes from src/main/cuda (so exactly what nvcc compiles), then the emulator's self-test
// kernels, then the table of every extern "C" kernel by name (kernel_list.inc, one
// EMU_KERNEL(name) line per kernel, written by the Java build from the sources).
#include "cuda_emu.h"

#include "fsdp4j_kernels.cu"
#include "selftest_kernels.cu"

#include "emu_bind.h"

namespace emu {

const KernelEntry kernel_table[] = {
#define EMU_KERNEL(name) {#name, bind(&name)},
#include "kernel_list.inc"
#undef EMU_KERNEL
};

const size_t kernel_count = sizeof kernel_table / sizeof kernel_table[0];

}  // namespace emu
