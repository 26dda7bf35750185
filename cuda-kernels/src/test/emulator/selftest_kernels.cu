// Kernels that exercise the emulator's own model of CUDA (cuda_emu.h) on the intrinsics the
// production kernels do not use yet, checked by EmulatorSelfTestCases against the CUDA
// Programming Guide's definitions: every shuffle flavour with and without a sub-warp width,
// the votes, __syncwarp, atomics, and a last-block-done reduction across blocks.

// out (gridDim.x·blockDim.x, 8), per thread: __shfl_sync from lane (3·lane + 1) mod 32,
// __shfl_up_sync by 3, __shfl_down_sync by 5 over width 8, __shfl_xor_sync by 16 over width 8
// (lanes 0-15 would read a later group: they get their own value), the ballot of lane ≡ 0
// (mod 3), __any_sync(lane == 7), __all_sync(lane < 32), and a neighbour's value passed through
// shared memory across __syncwarp.
extern "C" __global__ void emu_selftest_warp_kernel(int* out) {
    __shared__ int slot[1024];
    int t = threadIdx.x, lane = t & 31;
    int v = 1000 * (t >> 5) + lane;   // distinct per thread: the source shows in the result
    int* o = out + 8 * (blockIdx.x * blockDim.x + t);
    o[0] = __shfl_sync(0xffffffffu, v, (3 * lane + 1) & 31);
    o[1] = __shfl_up_sync(0xffffffffu, v, 3);
    o[2] = __shfl_down_sync(0xffffffffu, v, 5, 8);
    o[3] = __shfl_xor_sync(0xffffffffu, v, 16, 8);
    o[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
    o[5] = __any_sync(0xffffffffu, lane == 7);
    o[6] = __all_sync(0xffffffffu, lane < 32);
    slot[t] = v;
    __syncwarp();
    o[7] = slot[t ^ 1];   // the neighbour's write, ordered by __syncwarp
}

// counters[0] += 1 per thread (int atomicAdd), sums[0] += 0.5 per thread (float atomicAdd, exact
// in fp32 for these counts), counters[1] = max thread id (atomicCAS loop), counters[3] = 7 by
// every thread's atomicExch and counters[2] = how many found the 7 already there (all but one);
// the last block to finish (ticket in counters[4]) writes counters[5] = counters[0] as it sees
// it, after a __threadfence.
extern "C" __global__ void emu_selftest_atomics_kernel(int* counters, float* sums) {
    __shared__ bool last;
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&counters[0], 1);
    atomicAdd(&sums[0], 0.5f);
    int seen = counters[1];
    while (seen < id) {
        int prev = atomicCAS(&counters[1], seen, id);
        if (prev == seen) break;
        seen = prev;
    }
    if (atomicExch(&counters[3], 7) == 7) atomicAdd(&counters[2], 1);   // all but the first exchange
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&counters[4], 1) == static_cast<int>(gridDim.x) - 1;
    __syncthreads();
    if (last && threadIdx.x == 0) counters[5] = counters[0];
}
