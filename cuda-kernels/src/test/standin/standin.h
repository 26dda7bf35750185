// The stand-in CUDA's core: what libcuda.so.1 (the stand-in driver, which holds it) shares with
// the stand-in libcudart.so.13, libcublas.so.13 and libnccl.so.2 that link against it, as the real
// runtime and libraries sit on the real driver. A stand-in device is host memory and host threads:
//   - devices: FSDP4J_STANDIN_DEVICES of them (default 1), each with FSDP4J_STANDIN_MEMORY_MIB of
//     memory (default 4096), reporting an H100's limits under the name "stand-in CUDA, not a GPU";
//   - memory: every cudaMalloc is its own host allocation, 256-byte aligned, between guard bytes
//     (checked after each kernel and at free), filled with 0xFF (NaN) when handed out and again
//     when freed; freed blocks stay in a quarantine for a while, so a late use reads NaN and a
//     kernel given a freed pointer is an illegal address;
//   - streams: one worker thread each, running its queue in order; events mark a stream's count
//     of finished work; FSDP4J_STANDIN_JITTER=1 sleeps a random moment before some operations, so
//     work that no event orders runs in either order;
//   - errors: the real codes and texts; a fault of queued work (an illegal or misaligned address,
//     a failed launch) is sticky on its device, as on a GPU, and explained on stderr.
// Every handle is a pointer to one of these objects, checked against the set of live ones.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace standin {

// The codes the runtime and the driver share (cudaError_t and CUresult agree on these values).
enum Code : int {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_CONFIGURATION = 9,   // runtime only
    INVALID_MEMCPY_DIRECTION = 21,   // runtime only
    INSUFFICIENT_DRIVER = 35,   // runtime only
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    NOT_READY = 600,
    ILLEGAL_ADDRESS = 700,
    LAUNCH_OUT_OF_RESOURCES = 701,
    MISALIGNED_ADDRESS = 716,
    LAUNCH_FAILED = 719,
    NOT_PERMITTED = 800,
    NOT_SUPPORTED = 801,
    TIMEOUT = 909,
};

// "cudaErrorInvalidValue" / "CUDA_ERROR_INVALID_VALUE" and their common text, as the real libraries.
const char* runtime_error_name(int code);
const char* driver_error_name(int code);
const char* error_text(int code);

// One line on stderr, prefixed "[stand-in CUDA]": why a call failed, in words (the analogue of
// what compute-sanitizer or CUDA_LAUNCH_BLOCKING would tell).
void report(const std::string& what);

// ------------------------------------------------------------------ devices and contexts

struct Context;

// What a host thread has current: a context (the runtime's current device is its device), the
// runtime's last error, and whether it runs a host function (which must not call CUDA).
struct ThreadState {
    Context* ctx = nullptr;
    int lastError = OK;
    bool inHostFunction = false;
};
ThreadState& thread_state();

// Reads the environment and makes the devices once; the runtime calls it on first use, the
// driver's cuInit does, and driver calls before either fail with NOT_INITIALIZED.
int init();
bool initialized();
// The CUDA version the stand-in driver supports (cuDriverGetVersion, cudaDriverGetVersion):
// FSDP4J_STANDIN_DRIVER_VERSION, 1000 * major + 10 * minor (default 13010); below 13000 the
// stand-in runtime fails as the real CUDA 13 runtime does on an older driver.
int driver_version();
int device_count();
size_t device_memory_bytes();

struct Context {
    int device;
    // Atomic: ranks sharing one GPU retain and release its primary context from their own
    // threads at once, which the real driver allows (a plain int lost counts under that race).
    std::atomic<int> driverRefs{0};       // cuDevicePrimaryCtxRetain minus Release
    std::atomic<bool> runtimeActive{false};  // the runtime has used it (cudaSetDevice, any runtime call)
};
Context* primary_context(int device);
bool is_context(const void* p);

// The calling thread's current device for the runtime: its context's, else device 0's primary
// context is made current (the runtime's implicit initialisation). Returns a code.
int runtime_device(int* device);
// Makes device's primary context current (cudaSetDevice).
int set_runtime_device(int device);
// The calling thread's current context for the driver (nullptr when none).
Context* current_context();

// A queued fault leaves its device unusable until cudaDeviceReset, as on a GPU: every later
// call on it returns the fault's code.
int sticky_error(int device);
void set_sticky_error(int device, int code, const std::string& why);

// ------------------------------------------------------------------ memory

enum class MemKind { DEVICE, PINNED_HOST };

struct Allocation {
    uintptr_t base = 0;    // what the caller got
    size_t bytes = 0;      // what the caller asked for
    int device = -1;       // DEVICE only
    MemKind kind = MemKind::DEVICE;
    bool freed = false;    // in the quarantine
};

int malloc_device(int device, size_t bytes, void** out);
int free_device(void* p);   // synchronizes the device first, as cudaFree does
int malloc_pinned(size_t bytes, void** out);
int free_pinned(void* p);   // synchronizes every device first
size_t device_bytes_in_use(int device);
// Frees every allocation of a device (cudaDeviceReset).
void free_all_device_memory(int device);

// The live or quarantined allocation holding address p, copied out; false when none does.
bool find_allocation(uintptr_t p, Allocation* out);

// Empty when [p, p + bytes) lies inside one live device allocation of `device` and p is a
// multiple of align; else why not, naming `what` (the argument) and the allocation found.
std::string check_device_range(int device, uintptr_t p, size_t bytes, size_t align, const std::string& what);
// As above for an address only (a kernel's pointer argument, whose extent is the kernel's business).
std::string check_device_pointer(int device, uintptr_t p, size_t align, const std::string& what);
// Empty when the guard bytes around the allocation holding p are intact, else what happened.
std::string check_guards(uintptr_t p);

// ------------------------------------------------------------------ streams and events

struct Stream;

// Work waits for a stream to have finished `seq` operations.
struct Dependency {
    std::shared_ptr<Stream> stream;
    uint64_t seq;
};

struct Stream {
    int device = 0;
    unsigned flags = 0;
    bool legacy = false;   // the NULL stream
    std::mutex m;
    std::condition_variable cv;
    struct Op {
        std::string what;
        std::vector<Dependency> deps;
        std::function<int()> work;   // returns OK or a code that becomes the device's sticky error
    };
    std::deque<Op> queue;
    uint64_t enqueued = 0;    // operations queued so far
    uint64_t completed = 0;   // operations finished so far (in order)
    bool stopping = false;
    std::thread* worker = nullptr;
};

// A live stream from a handle (NULL or cudaStreamLegacy: the legacy stream of the caller's
// current device), or INVALID_HANDLE.
int resolve_stream(void* handle, std::shared_ptr<Stream>* out);
int create_stream(int device, unsigned flags, void** handle);
int destroy_stream(void* handle);
// Queues work on s, after deps; fails with the device's sticky error, or NOT_PERMITTED inside a host function.
// seq, if given, receives the operation's sequence number on s (what a Dependency on it names).
int enqueue(const std::shared_ptr<Stream>& s, std::string what, std::function<int()> work,
            std::vector<Dependency> deps = {}, uint64_t* seq = nullptr);
// Blocks until s has finished what was queued so far; returns the device's sticky error.
int synchronize_stream(const std::shared_ptr<Stream>& s);
int synchronize_device(int device);
// Every stream of a device, the legacy one included.
std::vector<std::shared_ptr<Stream>> streams_of(int device);
// Blocks until d.stream has finished d.seq operations, or until timeoutMs (< 0: forever) passes.
bool wait_for(const Dependency& d, long timeoutMs = -1);

struct Event {
    int device = 0;
    unsigned flags = 0;   // cudaEventDisableTiming (2): no timestamp, as on a GPU
    std::mutex m;
    bool recorded = false;
    Dependency at{nullptr, 0};
    uint64_t generation = 0;   // cudaEventRecord calls so far: a stale stamp job leaves stampNs alone
    int64_t stampNs = -1;      // steady-clock time its stream reached it (timing events only)
};
int create_event(int device, unsigned flags, void** handle);
int resolve_event(void* handle, std::shared_ptr<Event>* out);
int destroy_event(void* handle);

// A host thread that runs host functions must not call CUDA: the wrappers check this first.
bool in_host_function();

// Runs fn on the device's one host-function thread and waits for it (called by a stream's worker
// when the stream reaches a cudaLaunchHostFunc). As the CUDA driver's callback thread, that thread
// runs the host functions of every stream of the device one at a time, in the order they come due:
// a host function that blocks holds up every other stream's host functions on that device.
void run_host_function(int device, const std::function<void()>& fn);

// Live handles of other kinds (modules, functions, cuBLAS handles, communicators) are kept in a
// set per kind so that a stale or foreign pointer is INVALID_HANDLE, never a crash.
void register_handle(const char* kind, const void* p);
bool is_handle(const char* kind, const void* p);
void unregister_handle(const char* kind, const void* p);

// Resets a device: waits for and destroys its streams and events, frees its memory, clears its
// sticky error (cudaDeviceReset).
int reset_device(int device);

}  // namespace standin
