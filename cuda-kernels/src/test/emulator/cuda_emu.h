// CUDA execution emulator: what g++ needs to compile the kernels of src/main/cuda unchanged as
// C++ and run them on the CPU with CUDA's execution model (emu_kernels.cc includes it before the
// kernel sources). One block runs at a time; each thread of the block is a cooperative fiber
// that runs until it finishes or reaches a synchronisation point (emu_scheduler.cc):
//   - __syncthreads is a real barrier over the block's live threads, which must all reach the
//     same call site;
//   - warp intrinsics exchange values through the warp: every lane named in the mask must make
//     the same call (site, kind, mask) before any of them gets its result;
//   - __shared__ variables are the program's thread-local storage (the emulator runs on one OS
//     thread and defines no thread_local of its own), re-poisoned at every block start with a
//     byte that differs between schedules, so a read before a write changes the result;
//   - atomics are GCC __atomic builtins (fibers never interleave inside one call).
// Half and bf16 come from the CUDA headers' host-side code where CUDA is installed, else from
// fallback/ (DType's rounding), chosen by the include path the build passes; a kernel that uses
// more of cuda_fp16.h / cuda_bf16.h than the conversions needs it added to fallback/ too.
//
// What this cannot model, and what covers it instead:
//   - the GPU's arithmetic: nvcc contracts a·b + c into FMA by default and its expf/logf differ
//     from glibc's by up to 2 ulp, so the emulator's bits are not the GPU's. The tests' error
//     bounds (Approx) hold for either; the sanitized build contracts with FMA where the host has
//     it; the GPU conformance tests (scripts/gpu-check.sh) run the same kernels for real.
//   - fast-math intrinsics (__expf, __fdividef, rsqrtf): not defined here, so a kernel that uses
//     one fails to compile until its documented error is modelled (none is used; the fatbin is
//     built without --use_fast_math).
//   - the memory model between blocks: blocks run one after another and every write is visible
//     at once, so a missing __threadfence or a race between blocks shows only where it makes the
//     result depend on the block order (the schedules run blocks in three orders).
//   - timing, occupancy, bank conflicts, register spills; sizes near the 32-bit index limits
//     (too many threads to emulate); tensor cores (wmma/mma); dynamic shared memory (extern
//     __shared__; the tests' recorder refuses launches with dynamic shared bytes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

// Execution-space qualifiers mean nothing on the host; __shared__ becomes block storage.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// One copy serves every block, as one block runs at a time. Thread-local rather than in a named
// section because GCC ignores section attributes on a template's static locals (block_sum<T>);
// the scheduler finds the whole TLS segment through dl_iterate_phdr and poisons it.
#define __shared__ static thread_local

namespace emu {

// Where a synchronising call was made, so divergent calls can be told apart and reported.
struct Site {
    const char* file;
    int line;
};

enum class WarpOp : int { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR, BALLOT, ANY, ALL, SYNCWARP };

// The indices of the running thread and block (set by the scheduler before it resumes a fiber).
const uint3& thread_idx();
extern uint3 block_idx;
extern dim3 block_dim;
extern dim3 grid_dim;

void syncthreads(Site site);

// One warp-wide exchange: every lane in mask passes 8 bytes and an argument (lane, delta or lane
// mask; the predicate for votes) and gets back its result bits once all of them have called.
uint64_t warp_exchange(Site site, WarpOp op, unsigned mask, uint64_t value, int arg, int width);

template <typename T>
uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    return bits;
}

template <typename T>
T from_bits(uint64_t bits) {
    T v;
    memcpy(&v, &bits, sizeof(T));
    return v;
}

// Atomic read-modify-writes on device memory; each returns the old value, as CUDA's do.
template <typename T>
T atomic_add(T* address, T v) {
    if constexpr (std::is_integral<T>::value) {
        return __atomic_fetch_add(address, v, __ATOMIC_SEQ_CST);
    } else {
        T old, sum;
        __atomic_load(address, &old, __ATOMIC_SEQ_CST);
        do {
            sum = old + v;
        } while (!__atomic_compare_exchange(address, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
        return old;
    }
}

inline void syncwarp(Site s, unsigned mask = 0xffffffffu) {
    warp_exchange(s, WarpOp::SYNCWARP, mask, 0, 0, 32);
}

template <typename T>
T shfl(Site s, WarpOp op, unsigned mask, T v, int arg, int width = 32) {
    return from_bits<T>(warp_exchange(s, op, mask, to_bits(v), arg, width));
}

}  // namespace emu

#define EMU_SITE (::emu::Site{__FILE__, __LINE__})

#define threadIdx (::emu::thread_idx())
#define blockIdx (static_cast<const uint3&>(::emu::block_idx))
#define blockDim (static_cast<const dim3&>(::emu::block_dim))
#define gridDim (static_cast<const dim3&>(::emu::grid_dim))
#define warpSize 32

#define __syncthreads() ::emu::syncthreads(EMU_SITE)
#define __syncwarp(...) ::emu::syncwarp(EMU_SITE __VA_OPT__(,) __VA_ARGS__)
// Memory fences order nothing here: blocks run one after another and fibers never interleave
// inside a statement, so every write is already visible (see the emulator's limits).
#define __threadfence() ((void)0)

#define __shfl_sync(mask, var, lane, ...) \
    ::emu::shfl(EMU_SITE, ::emu::WarpOp::SHFL_IDX, mask, var, lane __VA_OPT__(,) __VA_ARGS__)
#define __shfl_up_sync(mask, var, delta, ...) \
    ::emu::shfl(EMU_SITE, ::emu::WarpOp::SHFL_UP, mask, var, delta __VA_OPT__(,) __VA_ARGS__)
#define __shfl_down_sync(mask, var, delta, ...) \
    ::emu::shfl(EMU_SITE, ::emu::WarpOp::SHFL_DOWN, mask, var, delta __VA_OPT__(,) __VA_ARGS__)
#define __shfl_xor_sync(mask, var, laneMask, ...) \
    ::emu::shfl(EMU_SITE, ::emu::WarpOp::SHFL_XOR, mask, var, laneMask __VA_OPT__(,) __VA_ARGS__)
#define __ballot_sync(mask, pred) \
    ((unsigned)::emu::warp_exchange(EMU_SITE, ::emu::WarpOp::BALLOT, mask, 0, (pred) ? 1 : 0, 32))
#define __any_sync(mask, pred) ((int)::emu::warp_exchange(EMU_SITE, ::emu::WarpOp::ANY, mask, 0, (pred) ? 1 : 0, 32))
#define __all_sync(mask, pred) ((int)::emu::warp_exchange(EMU_SITE, ::emu::WarpOp::ALL, mask, 0, (pred) ? 1 : 0, 32))

inline int __popc(unsigned x) { return __builtin_popcount(x); }

template <typename T>
T atomicAdd(T* address, T v) { return ::emu::atomic_add(address, v); }

template <typename T>
T atomicExch(T* address, T v) {
    T old;
    __atomic_exchange(address, &v, &old, __ATOMIC_SEQ_CST);
    return old;
}

template <typename T>
T atomicCAS(T* address, T compare, T v) {
    __atomic_compare_exchange_n(address, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
