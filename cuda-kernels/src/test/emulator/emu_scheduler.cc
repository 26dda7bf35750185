// The emulator's block scheduler: each thread of a block is a fiber (emu_context.h) that runs until it
// finishes or waits (at __syncthreads, or in a warp call for lanes that have not called yet).
// The scheduler sweeps the block's threads in the schedule's order (ascending, descending, or a
// fresh shuffle per sweep), resuming each runnable one; a fiber whose thread finishes without
// waiting takes the next unstarted thread of the sweep itself, so barrier-free kernels cost one
// function call per thread, not two context switches. When nothing can run, either every live
// thread waits at the same __syncthreads (released together) or the block is stuck, which is
// reported with where every thread is. Blocks run one at a time, in the schedule's order.
// The same scheduler runs inside the stand-in libcuda.so.1 (src/test/standin), where launches
// come from several OS threads one at a time and a failure must not end the JVM: there the
// __shared__ memory is this module's TLS block of the launching thread, and a failed launch
// abandons its fibers and returns (emu_launch.h).
#include "cuda_emu.h"
#include "emu_context.h"
#include "emu_launch.h"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

namespace emu {

uint3 block_idx;
dim3 block_dim;
dim3 grid_dim;

namespace {

constexpr size_t STACK_BYTES = 256 * 1024;   // per fiber, plus one guard page below
constexpr int WARP = 32;

enum class State { NOT_STARTED, RUNNING, RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct Fiber;

struct Thread {
    uint3 idx;
    int linear = 0;
    State state = State::NOT_STARTED;
    Fiber* fiber = nullptr;
    Site site{nullptr, 0};   // where it waits
    // its pending warp call
    WarpOp op = WarpOp::SYNCWARP;
    unsigned mask = 0;
    uint64_t value = 0;
    int arg = 0;
    int width = WARP;
    uint64_t result = 0;
};

// Lanes of one warp waiting in the same warp call (disjoint masks may wait side by side).
struct WarpGroup {
    Site site;
    WarpOp op;
    unsigned mask;
    int width;
    int arrived;
    int needed;
};

struct Fiber {
    Context context;
    char* stack = nullptr;   // lowest usable byte
    Thread* thread = nullptr;
};

// The emulator is single-threaded. Fibers are made as a block needs them and kept for the next
// blocks (parked in free_fibers, never freed: the process is short-lived).
Context scheduler_context;
const void* scheduler_stack_bottom = nullptr;   // for ASan's fiber switches
size_t scheduler_stack_size = 0;
std::vector<Fiber*> free_fibers;
Fiber* starting_fiber = nullptr;

// The block being run.

std::vector<Thread> threads;
std::vector<std::vector<WarpGroup>> warp_groups;   // per warp of the block
std::vector<int> order;   // this sweep's order of thread indices
size_t sweep_pos = 0;
Thread* current = nullptr;
const std::function<void()>* body = nullptr;
std::string kernel_name;
const Schedule* schedule = nullptr;
bool on_fiber = false;                    // a fiber runs (not the scheduler)
LaunchError* failure_out = nullptr;       // where a failure goes instead of ending the process
bool failed = false;                      // this launch failed: abandon it

// Reports a failure of the launch. The runner's way: print it and end the process. With a
// LaunchError: record it; on a fiber, park that fiber for good (the scheduler returns from the
// launch); in the scheduler, return to the caller, which must unwind the launch.
void fail(int code, const std::string& what);

[[noreturn]] void fail_fatally(int code, const std::string& what) {
    fprintf(stderr, "emu: %s\n  in %s, block (%u, %u) of grid (%u, %u), block shape (%u, %u), schedule %s\n",
            what.c_str(), kernel_name.c_str(), block_idx.x, block_idx.y, grid_dim.x, grid_dim.y, block_dim.x,
            block_dim.y, schedule ? schedule->name.c_str() : "?");
    fflush(stderr);
    _exit(code);
}

const char* op_name(WarpOp op) {
    switch (op) {
        case WarpOp::SHFL_IDX: return "__shfl_sync";
        case WarpOp::SHFL_UP: return "__shfl_up_sync";
        case WarpOp::SHFL_DOWN: return "__shfl_down_sync";
        case WarpOp::SHFL_XOR: return "__shfl_xor_sync";
        case WarpOp::BALLOT: return "__ballot_sync";
        case WarpOp::ANY: return "__any_sync";
        case WarpOp::ALL: return "__all_sync";
        case WarpOp::SYNCWARP: return "__syncwarp";
    }
    return "?";
}

bool same_site(const Site& a, const Site& b) {
    return a.line == b.line && (a.file == b.file || strcmp(a.file, b.file) == 0);
}

std::string where(const Site& s) {
    const char* slash = strrchr(s.file, '/');
    return std::string(slash ? slash + 1 : s.file) + ":" + std::to_string(s.line);
}

std::string describe(const Thread& t) {
    std::ostringstream o;
    o << "thread " << t.linear << " (warp " << t.linear / WARP << " lane " << t.linear % WARP << ") ";
    switch (t.state) {
        case State::DONE: o << "has exited"; break;
        case State::AT_BARRIER: o << "waits in __syncthreads at " << where(t.site); break;
        case State::AT_WARP:
            o << "waits in " << op_name(t.op) << " at " << where(t.site) << " with mask 0x" << std::hex << t.mask;
            break;
        default: o << "is runnable"; break;
    }
    return o.str();
}

void switch_context(Context& from, Context& to, const void* to_bottom, size_t to_size) {
#if EMU_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, to_bottom, to_size);
    swap_context(from, to);
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
    (void)to_bottom;
    (void)to_size;
    swap_context(from, to);
#endif
}

void to_scheduler(Fiber* self) {
    on_fiber = false;
    switch_context(self->context, scheduler_context, scheduler_stack_bottom, scheduler_stack_size);
}

void to_fiber(Fiber* f) {
    on_fiber = true;
    switch_context(scheduler_context, f->context, f->stack, STACK_BYTES);
    on_fiber = false;
}

void fail(int code, const std::string& what) {
    if (failure_out == nullptr) fail_fatally(code, what);
    if (!failed) {
        failed = true;
        char where[200];
        snprintf(where, sizeof where, "\n  in %s, block (%u, %u) of grid (%u, %u), block shape (%u, %u)",
                 kernel_name.c_str(), block_idx.x, block_idx.y, grid_dim.x, grid_dim.y, block_dim.x, block_dim.y);
        failure_out->code = code;
        failure_out->what = what + where;
    }
    if (on_fiber) {
        Thread* t = current;
        to_scheduler(t->fiber);   // never resumed: the launch is abandoned
        abort();
    }
}


// The next thread of this sweep, if it has not started: the finishing fiber runs it directly.
Thread* claim_next_unstarted(Fiber* self) {
    if (sweep_pos + 1 < order.size() && threads[order[sweep_pos + 1]].state == State::NOT_STARTED) {
        Thread* t = &threads[order[++sweep_pos]];
        t->fiber = self;
        return t;
    }
    return nullptr;
}

void fiber_main() {
    Fiber* self = starting_fiber;
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
    for (;;) {
        while (self->thread != nullptr) {
            Thread* t = self->thread;
            current = t;
            t->state = State::RUNNING;
            (*body)();
            t->state = State::DONE;
            self->thread = claim_next_unstarted(self);
        }
        free_fibers.push_back(self);
        to_scheduler(self);
    }
}

Fiber* new_fiber() {
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = STACK_BYTES + page;
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED || mprotect(mem, page, PROT_NONE) != 0) {   // a stack overflow faults
        fail_fatally(EXIT_PLAN, "cannot map a fiber stack");
    }
    Fiber* f = new Fiber;
    f->stack = static_cast<char*>(mem) + page;
    make_context(f->context, f->stack, STACK_BYTES, fiber_main);
    return f;
}

// Starts thread t on a free fiber (a new one's first switch runs fiber_main).
void start(Thread* t) {
    Fiber* f;
    if (!free_fibers.empty()) {
        f = free_fibers.back();
        free_fibers.pop_back();
    } else {
        f = new_fiber();
    }
    f->thread = t;
    t->fiber = f;
    starting_fiber = f;
    to_fiber(f);
}

void resume(Thread* t) {
    t->state = State::RUNNING;
    current = t;
    to_fiber(t->fiber);
}

// Called on the running thread's fiber: park it in state s until the scheduler resumes it.
void wait_as(State s) {
    Thread* t = current;
    t->state = s;
    to_scheduler(t->fiber);
    current = t;
}

// The TLS segment of the module this scheduler is linked into (the runner, or the stand-in
// libcuda.so.1), which holds exactly the __shared__ variables (cuda_emu.h) and this anchor, in
// the calling thread's copy. Touching the anchor first makes sure a dlopen'ed module's block
// exists in this thread (glibc allocates it lazily).
static thread_local char tls_anchor;

struct SharedMemory {
    void* base = nullptr;
    size_t bytes = 0;
};

int find_tls(dl_phdr_info* info, size_t, void* out) {
    uintptr_t here = reinterpret_cast<uintptr_t>(&find_tls);
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        mine = ph.p_type == PT_LOAD && here >= start && here < start + ph.p_memsz;
    }
    if (!mine) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_TLS) {
            *static_cast<SharedMemory*>(out) = {info->dlpi_tls_data, info->dlpi_phdr[i].p_memsz};
        }
    }
    return 1;
}

SharedMemory shared_memory() {
    *static_cast<volatile char*>(&tls_anchor) = 0;
    SharedMemory s;
    dl_iterate_phdr(find_tls, &s);
    return s;
}

uint64_t next_random(uint64_t& s) {   // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void arrange(std::vector<int>& v, Order o, uint64_t& rng) {
    for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<int>(i);
    if (o == Order::DESCENDING) {
        std::reverse(v.begin(), v.end());
    } else if (o == Order::RANDOM) {
        for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[next_random(rng) % i]);
    }
}

std::string lanes_of(unsigned mask) {
    std::ostringstream o;
    o << "0x" << std::hex << mask;
    return o.str();
}

// Nothing can run and the block is not finished: say where every waiting or missing thread is.
void report_stuck() {
    std::ostringstream o;
    o << "deadlock: no thread can proceed";
    int shown = 0;
    for (const Thread& t : threads) {
        if (t.state != State::AT_WARP) continue;
        for (int l = 0; l < WARP; l++) {
            if (!(t.mask >> l & 1u)) continue;
            const Thread& other = threads[t.linear - t.linear % WARP + l];
            bool joined = other.state == State::AT_WARP && same_site(other.site, t.site) && other.op == t.op &&
                          other.mask == t.mask;
            if (!joined && shown < 8) {
                o << "\n  " << describe(t) << ", but " << describe(other);
                shown++;
            }
        }
    }
    for (const Thread& t : threads) {
        if (shown == 0 && t.state != State::DONE) {
            o << "\n  " << describe(t);
            shown++;
        }
    }
    fail(EXIT_DIVERGENT, o.str());
}

// Every live thread waits at a barrier: they must all be at the same one.
void release_barrier() {
    const Thread* first = nullptr;
    for (Thread& t : threads) {
        if (t.state != State::AT_BARRIER) continue;
        if (first == nullptr) {
            first = &t;
        } else if (!same_site(t.site, first->site)) {
            fail(EXIT_DIVERGENT, "divergent __syncthreads: " + describe(*first) + ", " + describe(t));
            return;
        }
    }
    for (Thread& t : threads) {
        if (t.state == State::AT_BARRIER) t.state = State::RUNNABLE;
    }
}

void run_block(uint64_t& rng, const SharedMemory& shared) {
    int n = static_cast<int>(threads.size());
    for (int i = 0; i < n; i++) {
        Thread& t = threads[i];
        t = Thread();
        t.linear = i;
        t.idx = make_uint3(i % block_dim.x, i / block_dim.x, 0);
    }
    warp_groups.assign((n + WARP - 1) / WARP, {});
    if (shared.base != nullptr) memset(shared.base, schedule->poison, shared.bytes);
    order.resize(n);
    for (;;) {
        arrange(order, schedule->order, rng);
        for (sweep_pos = 0; sweep_pos < order.size(); sweep_pos++) {
            Thread* t = &threads[order[sweep_pos]];
            if (t->state == State::NOT_STARTED) {
                start(t);
            } else if (t->state == State::RUNNABLE) {
                resume(t);
            }
            if (failed) return;
        }
        int done = 0, atBarrier = 0, runnable = 0;
        for (const Thread& t : threads) {
            done += t.state == State::DONE;
            atBarrier += t.state == State::AT_BARRIER;
            runnable += t.state == State::RUNNABLE;
        }
        if (done == n) return;
        if (runnable > 0) continue;
        if (done + atBarrier == n) {
            release_barrier();
            if (failed) return;
            continue;
        }
        report_stuck();
        return;
    }
}

// The source lane whose value lane l receives, or l itself where CUDA returns the caller's own.
int source_lane(const Thread& t, int l) {
    int w = t.width, base = l & ~(w - 1);
    switch (t.op) {
        case WarpOp::SHFL_IDX: return base | (t.arg & (w - 1));
        case WarpOp::SHFL_UP: return (l - base) >= t.arg ? l - t.arg : l;
        case WarpOp::SHFL_DOWN: return (l - base) + t.arg < w ? l + t.arg : l;
        case WarpOp::SHFL_XOR: {
            int s = l ^ t.arg;
            return s < base + w ? s : l;   // later groups are out of reach
        }
        default: return l;
    }
}

// All lanes of mask called: compute every lane's result and let the waiting ones go.
void complete_warp_call(Thread* warp0, unsigned mask, Thread* caller) {
    unsigned votes = 0;
    for (int l = 0; l < WARP; l++) {
        if ((mask >> l & 1u) && warp0[l].arg != 0) votes |= 1u << l;
    }
    for (int l = 0; l < WARP; l++) {
        if (!(mask >> l & 1u)) continue;
        Thread& t = warp0[l];
        switch (t.op) {
            case WarpOp::BALLOT: t.result = votes; break;
            case WarpOp::ANY: t.result = votes != 0; break;
            case WarpOp::ALL: t.result = votes == mask; break;
            case WarpOp::SYNCWARP: t.result = 0; break;
            default: {
                int s = source_lane(t, l);
                if (s < 0 || s >= WARP || !(mask >> s & 1u)) {
                    fail(EXIT_DIVERGENT, describe(t) + " reads lane " + std::to_string(s) +
                                             ", which is outside the mask (undefined in CUDA)");
                }
                t.result = warp0[s].value;
            }
        }
        if (&t != caller) t.state = State::RUNNABLE;
    }
}

}  // namespace

const uint3& thread_idx() {
    return current->idx;
}

void syncthreads(Site site) {
    current->site = site;
    wait_as(State::AT_BARRIER);
}

uint64_t warp_exchange(Site site, WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
    Thread* t = current;
    int lane = t->linear % WARP;
    Thread* warp0 = &threads[t->linear - lane];
    int lanesInWarp = std::min<int>(WARP, static_cast<int>(threads.size()) - (t->linear - lane));
    t->site = site;
    t->op = op;
    t->mask = mask;
    t->value = value;
    t->arg = arg;
    t->width = width;
    if (!(mask >> lane & 1u)) {
        fail(EXIT_DIVERGENT, describe(*t) + " calls " + op_name(op) + " at " + where(site) + " with mask " +
                                 lanes_of(mask) + ", which leaves out its own lane");
    }
    if (lanesInWarp < WARP && (mask >> lanesInWarp) != 0) {
        fail(EXIT_DIVERGENT, op_name(op) + std::string(" at ") + where(site) + " names lanes beyond the block's " +
                                 std::to_string(lanesInWarp) + " threads in this warp (mask " + lanes_of(mask) + ")");
    }
    if (width < 1 || width > WARP || (width & (width - 1)) != 0) {
        fail(EXIT_DIVERGENT, describe(*t) + ": width " + std::to_string(width) + " is not a power of 2 up to 32");
    }
    std::vector<WarpGroup>& groups = warp_groups[t->linear / WARP];
    size_t g = 0;
    while (g < groups.size() && (groups[g].mask & mask) == 0) g++;
    if (g == groups.size()) {
        groups.push_back({site, op, mask, width, 0, __builtin_popcount(mask)});
    } else if (groups[g].mask != mask || groups[g].op != op || !same_site(groups[g].site, site) ||
               groups[g].width != width) {
        std::string other;
        for (int l = 0; l < lanesInWarp && other.empty(); l++) {
            if (warp0[l].state == State::AT_WARP && (warp0[l].mask & mask) != 0) other = describe(warp0[l]);
        }
        t->state = State::AT_WARP;
        fail(EXIT_DIVERGENT, "divergent warp call: " + other + ", " + describe(*t));
    }
    if (++groups[g].arrived == groups[g].needed) {
        groups.erase(groups.begin() + static_cast<long>(g));
        complete_warp_call(warp0, mask, t);
        return t->result;
    }
    wait_as(State::AT_WARP);
    return t->result;
}

bool launch(const std::string& kernel, Dim grid, Dim block, const Schedule& s, const std::function<void()>& fn,
            LaunchError* error) {
    kernel_name = kernel;
    schedule = &s;
    body = &fn;
    failure_out = error;
    failed = false;
    grid_dim = dim3(grid.x, grid.y, 1);
    block_dim = dim3(block.x, block.y, 1);
    threads.assign(static_cast<size_t>(block.x) * block.y, Thread());
    uint64_t rng = s.seed;
    std::vector<int> blocks(static_cast<size_t>(grid.x) * grid.y);
    arrange(blocks, s.order, rng);
    SharedMemory shared = shared_memory();
    for (int b : blocks) {
        block_idx = make_uint3(b % grid.x, b / grid.x, 0);
        run_block(rng, shared);
        if (failed) break;
    }
    // the threads of an abandoned block keep their fibers: drop the references to them
    for (Thread& t : threads) t.fiber = nullptr;
    current = nullptr;
    failure_out = nullptr;
    return !failed;
}

}  // namespace emu
