// The stand-in CUDA's core (standin.h): devices and contexts, memory with guard bytes and a
// quarantine, streams as worker threads, events, sticky errors, and the registry of live handles.
#include "standin.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <sstream>

namespace standin {

namespace {

constexpr size_t GUARD_BYTES = 256;                  // before and after every allocation
constexpr unsigned char GUARD = 0xFD;
constexpr unsigned char POISON = 0xFF;               // NaN in fp32, fp16 and bf16; -1 in int32
constexpr size_t QUARANTINE_BYTES = size_t(256) << 20;

struct Block {
    Allocation a;
    unsigned char* raw = nullptr;
    size_t rawBytes = 0;
};

struct Globals {
    std::mutex initMutex;
    std::atomic<bool> ready{false};
    int devices = 1;
    size_t memoryBytes = size_t(4096) << 20;
    bool jitter = false;
    std::vector<Context*> contexts;                  // the primary context of each device

    std::mutex stickyMutex;
    std::vector<int> sticky;

    std::mutex memMutex;
    std::map<uintptr_t, Block> live;                 // by base
    std::map<uintptr_t, Block> freed;                // the quarantine, by base
    std::deque<uintptr_t> freedOrder;
    size_t freedBytes = 0;
    std::vector<size_t> inUse;                       // device bytes per device

    // per device: the thread that runs host functions, and its queue
    struct Callbacks {
        std::mutex m;
        std::condition_variable cv;
        std::deque<std::function<void()>> queue;
    };
    std::vector<Callbacks*> callbacks;

    std::mutex handleMutex;
    std::map<const void*, std::shared_ptr<Stream>> streams;
    std::map<const void*, std::shared_ptr<Event>> events;
    std::vector<std::shared_ptr<Stream>> legacy;     // per device
    std::map<std::string, std::set<const void*>> others;
};

Globals& g() {
    static Globals* globals = new Globals;   // never destroyed: worker threads may outlive main
    return *globals;
}

pthread_key_t threadKey;
pthread_once_t threadKeyOnce = PTHREAD_ONCE_INIT;

void deleteThreadState(void* p) {
    delete static_cast<ThreadState*>(p);
}

void makeThreadKey() {
    pthread_key_create(&threadKey, deleteThreadState);
}

size_t envSize(const char* name, size_t fallback) {
    const char* v = getenv(name);
    if (v == nullptr || *v == 0) return fallback;
    char* end = nullptr;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end != 0) {
        report(std::string("ignoring ") + name + "=" + v + ": not a whole number");
        return fallback;
    }
    return static_cast<size_t>(x);
}

std::string hex(uintptr_t p) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(p));
    return b;
}

std::string describe(const Allocation& a) {
    std::ostringstream o;
    o << (a.kind == MemKind::DEVICE ? "the device allocation of " : "the pinned host allocation of ") << a.bytes
      << " bytes at " << hex(a.base);
    if (a.kind == MemKind::DEVICE) o << " on cuda:" << a.device;
    return o.str();
}

// The block holding p in `map` (p may be one past the end), or nullptr.
Block* holding(std::map<uintptr_t, Block>& map, uintptr_t p) {
    auto it = map.upper_bound(p);
    if (it == map.begin()) return nullptr;
    --it;
    Block& b = it->second;
    return p <= b.a.base + b.a.bytes ? &b : nullptr;
}

void fillGuards(Block& b) {
    memset(b.raw, GUARD, GUARD_BYTES);
    unsigned char* end = reinterpret_cast<unsigned char*>(b.a.base) + b.a.bytes;
    memset(end, GUARD, b.raw + b.rawBytes - end);
}

std::string guardDamage(const Block& b) {
    const unsigned char* end = reinterpret_cast<const unsigned char*>(b.a.base) + b.a.bytes;
    for (const unsigned char* q = end; q < b.raw + b.rawBytes; q++) {
        if (*q != GUARD) {
            return "byte " + std::to_string(q - end) + " past the end of " + describe(b.a) + " was overwritten";
        }
    }
    for (const unsigned char* q = b.raw; q < b.raw + GUARD_BYTES; q++) {
        if (*q != GUARD) {
            return "byte " + std::to_string(b.raw + GUARD_BYTES - q) + " before the start of " + describe(b.a) +
                   " was overwritten";
        }
    }
    return "";
}

int allocate(MemKind kind, int device, size_t bytes, void** out) {
    Globals& G = g();
    size_t rawBytes = (GUARD_BYTES + bytes + GUARD_BYTES + 255) / 256 * 256;
    {
        std::lock_guard<std::mutex> lock(G.memMutex);
        if (kind == MemKind::DEVICE && G.inUse[device] + bytes > G.memoryBytes) {
            report("cudaMalloc(" + std::to_string(bytes) + " bytes) on cuda:" + std::to_string(device) +
                   ": out of memory (" + std::to_string(G.inUse[device]) + " of " + std::to_string(G.memoryBytes) +
                   " bytes in use)");
            return OUT_OF_MEMORY;
        }
        if (kind == MemKind::DEVICE) G.inUse[device] += bytes;
    }
    unsigned char* raw = static_cast<unsigned char*>(aligned_alloc(256, rawBytes));
    if (raw == nullptr) {
        std::lock_guard<std::mutex> lock(G.memMutex);
        if (kind == MemKind::DEVICE) G.inUse[device] -= bytes;
        return OUT_OF_MEMORY;
    }
    Block b;
    b.raw = raw;
    b.rawBytes = rawBytes;
    b.a.base = reinterpret_cast<uintptr_t>(raw + GUARD_BYTES);
    b.a.bytes = bytes;
    b.a.device = device;
    b.a.kind = kind;
    fillGuards(b);
    memset(raw + GUARD_BYTES, POISON, bytes);   // never zeros: code that assumes them fails
    *out = reinterpret_cast<void*>(b.a.base);
    std::lock_guard<std::mutex> lock(G.memMutex);
    G.live[b.a.base] = b;
    return OK;
}

// Moves a block into the quarantine; frees the oldest beyond its size, checking that nothing
// wrote into them after the free. memMutex held.
std::vector<std::string> quarantine(Block b) {
    Globals& G = g();
    std::vector<std::string> problems;
    b.a.freed = true;
    memset(reinterpret_cast<void*>(b.a.base), POISON, b.a.bytes);
    G.freed[b.a.base] = b;
    G.freedOrder.push_back(b.a.base);
    G.freedBytes += b.a.bytes;
    while (G.freedBytes > QUARANTINE_BYTES && !G.freedOrder.empty()) {
        auto it = G.freed.find(G.freedOrder.front());
        G.freedOrder.pop_front();
        if (it == G.freed.end()) continue;
        Block& old = it->second;
        const unsigned char* p = reinterpret_cast<const unsigned char*>(old.a.base);
        for (size_t i = 0; i < old.a.bytes; i++) {
            if (p[i] != POISON) {
                problems.push_back("byte " + std::to_string(i) + " of " + describe(old.a) +
                                   " was written after it was freed");
                break;
            }
        }
        G.freedBytes -= old.a.bytes;
        free(old.raw);
        G.freed.erase(it);
    }
    return problems;
}

uint64_t nextRandom(uint64_t& s) {   // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Under FSDP4J_STANDIN_JITTER: usually nothing, one time in eight up to 0.5 ms, one in thirty-two
// 1 to 5 ms (a stream held up behind other work, as on a busy GPU).
void jitter(uint64_t& rng) {
    uint64_t r = nextRandom(rng);
    if (r % 8 == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds((r >> 8) % 500));
    } else if (r % 32 == 1) {
        std::this_thread::sleep_for(std::chrono::microseconds(1000 + (r >> 8) % 4000));
    }
}

void runWorker(std::shared_ptr<Stream> s) {
    uint64_t rng = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                   reinterpret_cast<uintptr_t>(s.get());
    bool jittery = g().jitter;
    for (;;) {
        Stream::Op* op;
        {
            std::unique_lock<std::mutex> lock(s->m);
            s->cv.wait(lock, [&] { return !s->queue.empty() || s->stopping; });
            if (s->queue.empty()) break;
            op = &s->queue.front();   // stays valid: the queue only grows at the back meanwhile
        }
        for (const Dependency& d : op->deps) wait_for(d);
        if (jittery) jitter(rng);
        int rc = sticky_error(s->device);
        if (rc == OK) {
            try {
                rc = op->work();
            } catch (const std::exception& e) {
                report(op->what + ": " + e.what());
                rc = LAUNCH_FAILED;
            }
            if (rc != OK) set_sticky_error(s->device, rc, op->what);
        }
        {
            std::lock_guard<std::mutex> lock(s->m);
            s->queue.pop_front();
            s->completed++;
        }
        s->cv.notify_all();
    }
}

std::shared_ptr<Stream> newStream(int device, unsigned flags, bool legacy) {
    auto s = std::make_shared<Stream>();
    s->device = device;
    s->flags = flags;
    s->legacy = legacy;
    std::thread t(runWorker, s);
    t.detach();
    return s;
}

void runCallbacks(Globals::Callbacks* c) {
    ThreadState& ts = thread_state();
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> lock(c->m);
            c->cv.wait(lock, [&] { return !c->queue.empty(); });
            task = std::move(c->queue.front());
            c->queue.pop_front();
        }
        ts.inHostFunction = true;
        task();
        ts.inHostFunction = false;
    }
}

void stopStream(const std::shared_ptr<Stream>& s) {
    {
        std::lock_guard<std::mutex> lock(s->m);
        s->stopping = true;
    }
    s->cv.notify_all();
}

}  // namespace

// ------------------------------------------------------------------ errors

const char* runtime_error_name(int code) {
    switch (code) {
        case OK: return "cudaSuccess";
        case INVALID_VALUE: return "cudaErrorInvalidValue";
        case OUT_OF_MEMORY: return "cudaErrorMemoryAllocation";
        case NOT_INITIALIZED: return "cudaErrorInitializationError";
        case INSUFFICIENT_DRIVER: return "cudaErrorInsufficientDriver";
        case INVALID_CONFIGURATION: return "cudaErrorInvalidConfiguration";
        case INVALID_MEMCPY_DIRECTION: return "cudaErrorInvalidMemcpyDirection";
        case NO_DEVICE: return "cudaErrorNoDevice";
        case INVALID_DEVICE: return "cudaErrorInvalidDevice";
        case INVALID_IMAGE: return "cudaErrorInvalidKernelImage";
        case INVALID_CONTEXT: return "cudaErrorDeviceUninitialized";
        case INVALID_HANDLE: return "cudaErrorInvalidResourceHandle";
        case NOT_FOUND: return "cudaErrorSymbolNotFound";
        case NOT_READY: return "cudaErrorNotReady";
        case ILLEGAL_ADDRESS: return "cudaErrorIllegalAddress";
        case LAUNCH_OUT_OF_RESOURCES: return "cudaErrorLaunchOutOfResources";
        case MISALIGNED_ADDRESS: return "cudaErrorMisalignedAddress";
        case LAUNCH_FAILED: return "cudaErrorLaunchFailure";
        case NOT_PERMITTED: return "cudaErrorNotPermitted";
        case NOT_SUPPORTED: return "cudaErrorNotSupported";
        case TIMEOUT: return "cudaErrorTimeout";
        default: return "cudaErrorUnknown";
    }
}

const char* driver_error_name(int code) {
    switch (code) {
        case OK: return "CUDA_SUCCESS";
        case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
        case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
        case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
        case NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
        case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
        case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
        case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
        case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
        case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
        case NOT_READY: return "CUDA_ERROR_NOT_READY";
        case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
        case LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
        case MISALIGNED_ADDRESS: return "CUDA_ERROR_MISALIGNED_ADDRESS";
        case LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
        case NOT_PERMITTED: return "CUDA_ERROR_NOT_PERMITTED";
        case NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
        case TIMEOUT: return "CUDA_ERROR_TIMEOUT";
        default: return nullptr;   // not a CUresult the stand-in knows: cuGetErrorName fails
    }
}

const char* error_text(int code) {
    switch (code) {
        case OK: return "no error";
        case INVALID_VALUE: return "invalid argument";
        case OUT_OF_MEMORY: return "out of memory";
        case NOT_INITIALIZED: return "initialization error";
        case INSUFFICIENT_DRIVER: return "CUDA driver version is insufficient for CUDA runtime version";
        case INVALID_CONFIGURATION: return "invalid configuration argument";
        case INVALID_MEMCPY_DIRECTION: return "invalid copy direction for memcpy";
        case NO_DEVICE: return "no CUDA-capable device is detected";
        case INVALID_DEVICE: return "invalid device ordinal";
        case INVALID_IMAGE: return "device kernel image is invalid";
        case INVALID_CONTEXT: return "invalid device context";
        case INVALID_HANDLE: return "invalid resource handle";
        case NOT_FOUND: return "named symbol not found";
        case NOT_READY: return "device not ready";
        case ILLEGAL_ADDRESS: return "an illegal memory access was encountered";
        case LAUNCH_OUT_OF_RESOURCES: return "too many resources requested for launch";
        case MISALIGNED_ADDRESS: return "misaligned address";
        case LAUNCH_FAILED: return "unspecified launch failure";
        case NOT_PERMITTED: return "operation not permitted";
        case NOT_SUPPORTED: return "operation not supported";
        case TIMEOUT: return "wait operation timed out";
        default: return "unknown error";
    }
}

void report(const std::string& what) {
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    fprintf(stderr, "[stand-in CUDA] %s\n", what.c_str());
    fflush(stderr);
}

// ------------------------------------------------------------------ devices and contexts

ThreadState& thread_state() {
    pthread_once(&threadKeyOnce, makeThreadKey);
    ThreadState* ts = static_cast<ThreadState*>(pthread_getspecific(threadKey));
    if (ts == nullptr) {
        ts = new ThreadState;
        pthread_setspecific(threadKey, ts);
    }
    return *ts;
}

int init() {
    Globals& G = g();
    if (G.ready.load()) return OK;
    std::lock_guard<std::mutex> lock(G.initMutex);
    if (G.ready.load()) return OK;
    G.devices = static_cast<int>(envSize("FSDP4J_STANDIN_DEVICES", 1));
    if (G.devices < 1 || G.devices > 16) {
        report("FSDP4J_STANDIN_DEVICES must be 1 to 16; using 1");
        G.devices = 1;
    }
    G.memoryBytes = envSize("FSDP4J_STANDIN_MEMORY_MIB", 4096) << 20;
    const char* j = getenv("FSDP4J_STANDIN_JITTER");
    G.jitter = j != nullptr && strcmp(j, "1") == 0;
    G.sticky.assign(G.devices, OK);
    G.inUse.assign(G.devices, 0);
    for (int d = 0; d < G.devices; d++) {
        Context* c = new Context;
        c->device = d;
        G.contexts.push_back(c);
        G.legacy.push_back(newStream(d, 0, true));
        auto* callbacks = new Globals::Callbacks;
        G.callbacks.push_back(callbacks);
        std::thread(runCallbacks, callbacks).detach();
    }
    G.ready.store(true);
    report(std::to_string(G.devices) + " stand-in device(s) of " + std::to_string(G.memoryBytes >> 20) +
           " MiB: host memory and the kernel emulator, not a GPU" +
           (G.jitter ? "; random delays on every stream" : ""));
    return OK;
}

bool initialized() {
    return g().ready.load();
}

int driver_version() {
    static const int version = [] {
        size_t v = envSize("FSDP4J_STANDIN_DRIVER_VERSION", 13010);
        if (v < 1000 || v > 99990) {
            report("FSDP4J_STANDIN_DRIVER_VERSION must be a CUDA version such as 12040; using 13010");
            return 13010;
        }
        return static_cast<int>(v);
    }();
    return version;
}

int device_count() {
    return g().devices;
}

size_t device_memory_bytes() {
    return g().memoryBytes;
}

Context* primary_context(int device) {
    return g().contexts[device];
}

bool is_context(const void* p) {
    for (Context* c : g().contexts) {
        if (c == p) return true;
    }
    return false;
}

Context* current_context() {
    return thread_state().ctx;
}

int runtime_device(int* device) {
    init();
    ThreadState& ts = thread_state();
    if (ts.ctx == nullptr) {
        ts.ctx = primary_context(0);
    }
    ts.ctx->runtimeActive = true;
    *device = ts.ctx->device;
    return OK;
}

int set_runtime_device(int device) {
    init();
    if (device < 0 || device >= device_count()) return INVALID_DEVICE;
    ThreadState& ts = thread_state();
    ts.ctx = primary_context(device);
    ts.ctx->runtimeActive = true;
    return OK;
}

int sticky_error(int device) {
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.stickyMutex);
    return device >= 0 && device < static_cast<int>(G.sticky.size()) ? G.sticky[device] : OK;
}

void set_sticky_error(int device, int code, const std::string& why) {
    Globals& G = g();
    bool first;
    {
        std::lock_guard<std::mutex> lock(G.stickyMutex);
        first = G.sticky[device] == OK;
        if (first) G.sticky[device] = code;
    }
    if (first) {
        report("cuda:" + std::to_string(device) + ": " + why + " -> " + runtime_error_name(code) + " (" +
               error_text(code) + "); the device is unusable until cudaDeviceReset, as a GPU's context is");
    }
}

// ------------------------------------------------------------------ memory

int malloc_device(int device, size_t bytes, void** out) {
    if (bytes == 0) {
        *out = nullptr;
        return OK;
    }
    return allocate(MemKind::DEVICE, device, bytes, out);
}

int malloc_pinned(size_t bytes, void** out) {
    return allocate(MemKind::PINNED_HOST, -1, bytes == 0 ? 1 : bytes, out);
}

namespace {

// Checks that p is the start of a live allocation of `kind` and takes it out of the live set;
// the caller has synchronised what needs to be.
int release(void* p, MemKind kind, const char* call) {
    Globals& G = g();
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::vector<std::string> problems;
    Block b;
    {
        std::lock_guard<std::mutex> lock(G.memMutex);
        auto it = G.live.find(a);
        if (it == G.live.end() || it->second.a.kind != kind) {
            Block* inside = holding(G.live, a);
            Block* gone = holding(G.freed, a);
            std::string why = inside != nullptr
                    ? (inside->a.kind != kind ? "is " + describe(inside->a) : "is inside " + describe(inside->a) +
                                                                                  ", not its start")
                    : gone != nullptr ? "was freed already (" + describe(gone->a) + ")"
                                      : "is not memory the stand-in allocated";
            report(std::string(call) + "(" + hex(a) + "): the pointer " + why);
            return INVALID_VALUE;
        }
        b = it->second;
        G.live.erase(it);
        if (kind == MemKind::DEVICE) G.inUse[b.a.device] -= b.a.bytes;
        std::string damage = guardDamage(b);
        if (!damage.empty()) problems.push_back(damage);
        std::vector<std::string> late = quarantine(b);
        problems.insert(problems.end(), late.begin(), late.end());
    }
    for (const std::string& why : problems) {
        set_sticky_error(b.a.device >= 0 ? b.a.device : 0, ILLEGAL_ADDRESS, std::string(call) + ": " + why);
    }
    return OK;
}

}  // namespace

int free_device(void* p) {
    if (p == nullptr) return OK;
    Allocation a;
    if (find_allocation(reinterpret_cast<uintptr_t>(p), &a) && !a.freed && a.kind == MemKind::DEVICE) {
        synchronize_device(a.device);   // cudaFree waits for the device, as the real one does
    }
    return release(p, MemKind::DEVICE, "cudaFree");
}

int free_pinned(void* p) {
    if (p == nullptr) return OK;
    for (int d = 0; d < device_count(); d++) synchronize_device(d);
    return release(p, MemKind::PINNED_HOST, "cudaFreeHost");
}

size_t device_bytes_in_use(int device) {
    std::lock_guard<std::mutex> lock(g().memMutex);
    return g().inUse[device];
}

void free_all_device_memory(int device) {
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.memMutex);
    for (auto it = G.live.begin(); it != G.live.end();) {
        if (it->second.a.kind == MemKind::DEVICE && it->second.a.device == device) {
            G.inUse[device] -= it->second.a.bytes;
            quarantine(it->second);
            it = G.live.erase(it);
        } else {
            ++it;
        }
    }
}

bool find_allocation(uintptr_t p, Allocation* out) {
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.memMutex);
    Block* b = holding(G.live, p);
    if (b == nullptr) b = holding(G.freed, p);
    if (b == nullptr) return false;
    *out = b->a;
    return true;
}

std::string check_device_range(int device, uintptr_t p, size_t bytes, size_t align, const std::string& what) {
    Allocation a;
    std::string at = what + " (" + hex(p) + ")";
    if (!find_allocation(p, &a)) return at + " is not device memory";
    if (a.freed) return at + " points into " + describe(a) + ", which was freed";
    if (a.kind != MemKind::DEVICE) return at + " points into " + describe(a) + ", not device memory";
    if (a.device != device) return at + " points into " + describe(a) + ", not memory of cuda:" + std::to_string(device);
    if (p + bytes > a.base + a.bytes) {
        return at + ": its " + std::to_string(bytes) + " bytes run " + std::to_string(p + bytes - a.base - a.bytes) +
               " bytes past the end of " + describe(a);
    }
    if (align > 1 && p % align != 0) {
        return at + " is not aligned to its " + std::to_string(align) + "-byte elements";
    }
    return "";
}

std::string check_device_pointer(int device, uintptr_t p, size_t align, const std::string& what) {
    return check_device_range(device, p, 0, align, what);
}

std::string check_guards(uintptr_t p) {
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.memMutex);
    Block* b = holding(G.live, p);
    return b == nullptr ? "" : guardDamage(*b);
}

// ------------------------------------------------------------------ streams and events

bool in_host_function() {
    return thread_state().inHostFunction;
}

void run_host_function(int device, const std::function<void()>& fn) {
    Globals::Callbacks* c = g().callbacks[device];
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    {
        std::lock_guard<std::mutex> lock(c->m);
        c->queue.push_back([&] {
            fn();
            std::lock_guard<std::mutex> l(m);
            done = true;
            cv.notify_all();
        });
    }
    c->cv.notify_all();
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
}

int resolve_stream(void* handle, std::shared_ptr<Stream>* out) {
    Globals& G = g();
    if (handle == nullptr || handle == reinterpret_cast<void*>(0x1)) {   // NULL, cudaStreamLegacy
        int device;
        runtime_device(&device);
        *out = G.legacy[device];
        return OK;
    }
    std::lock_guard<std::mutex> lock(G.handleMutex);
    auto it = G.streams.find(handle);
    if (it == G.streams.end()) return INVALID_HANDLE;
    *out = it->second;
    return OK;
}

int create_stream(int device, unsigned flags, void** handle) {
    std::shared_ptr<Stream> s = newStream(device, flags, false);
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.handleMutex);
    G.streams[s.get()] = s;
    *handle = s.get();
    return OK;
}

int destroy_stream(void* handle) {
    Globals& G = g();
    std::shared_ptr<Stream> s;
    {
        std::lock_guard<std::mutex> lock(G.handleMutex);
        auto it = G.streams.find(handle);
        if (it == G.streams.end()) return INVALID_HANDLE;
        s = it->second;
        G.streams.erase(it);
    }
    stopStream(s);   // its worker finishes what is queued, as CUDA releases a busy stream later
    return OK;
}

std::vector<std::shared_ptr<Stream>> streams_of(int device) {
    Globals& G = g();
    std::vector<std::shared_ptr<Stream>> out;
    std::lock_guard<std::mutex> lock(G.handleMutex);
    out.push_back(G.legacy[device]);
    for (auto& [h, s] : G.streams) {
        if (s->device == device) out.push_back(s);
    }
    return out;
}

int enqueue(const std::shared_ptr<Stream>& s, std::string what, std::function<int()> work,
            std::vector<Dependency> deps, uint64_t* seq) {
    int sticky = sticky_error(s->device);
    if (sticky != OK) return sticky;
    // The legacy stream and blocking streams order each other implicitly.
    if (s->legacy) {
        for (const std::shared_ptr<Stream>& b : streams_of(s->device)) {
            if (b->legacy || (b->flags & 1u) != 0) continue;
            std::lock_guard<std::mutex> lock(b->m);
            deps.push_back({b, b->enqueued});
        }
    } else if ((s->flags & 1u) == 0) {
        std::shared_ptr<Stream> l = g().legacy[s->device];
        std::lock_guard<std::mutex> lock(l->m);
        deps.push_back({l, l->enqueued});
    }
    {
        std::lock_guard<std::mutex> lock(s->m);
        if (s->stopping) return INVALID_HANDLE;
        s->queue.push_back({std::move(what), std::move(deps), std::move(work)});
        s->enqueued++;
        if (seq != nullptr) *seq = s->enqueued;
    }
    s->cv.notify_all();
    return OK;
}

bool wait_for(const Dependency& d, long timeoutMs) {
    std::unique_lock<std::mutex> lock(d.stream->m);
    auto done = [&] { return d.stream->completed >= d.seq; };
    if (timeoutMs < 0) {
        d.stream->cv.wait(lock, done);
        return true;
    }
    return d.stream->cv.wait_for(lock, std::chrono::milliseconds(timeoutMs), done);
}

int synchronize_stream(const std::shared_ptr<Stream>& s) {
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lock(s->m);
        seq = s->enqueued;
    }
    wait_for({s, seq});
    return sticky_error(s->device);
}

int synchronize_device(int device) {
    for (const std::shared_ptr<Stream>& s : streams_of(device)) synchronize_stream(s);
    return sticky_error(device);
}

int create_event(int device, unsigned flags, void** handle) {
    auto e = std::make_shared<Event>();
    e->device = device;
    e->flags = flags;
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.handleMutex);
    G.events[e.get()] = e;
    *handle = e.get();
    return OK;
}

int resolve_event(void* handle, std::shared_ptr<Event>* out) {
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.handleMutex);
    auto it = G.events.find(handle);
    if (it == G.events.end()) return INVALID_HANDLE;
    *out = it->second;
    return OK;
}

int destroy_event(void* handle) {
    Globals& G = g();
    std::lock_guard<std::mutex> lock(G.handleMutex);
    return G.events.erase(handle) == 1 ? OK : INVALID_HANDLE;
}

void register_handle(const char* kind, const void* p) {
    std::lock_guard<std::mutex> lock(g().handleMutex);
    g().others[kind].insert(p);
}

bool is_handle(const char* kind, const void* p) {
    std::lock_guard<std::mutex> lock(g().handleMutex);
    auto it = g().others.find(kind);
    return it != g().others.end() && it->second.count(p) == 1;
}

void unregister_handle(const char* kind, const void* p) {
    std::lock_guard<std::mutex> lock(g().handleMutex);
    g().others[kind].erase(p);
}

int reset_device(int device) {
    Globals& G = g();
    std::vector<std::shared_ptr<Stream>> gone;
    for (const std::shared_ptr<Stream>& s : streams_of(device)) {
        synchronize_stream(s);
    }
    {
        std::lock_guard<std::mutex> lock(G.handleMutex);
        for (auto it = G.streams.begin(); it != G.streams.end();) {
            if (it->second->device == device) {
                gone.push_back(it->second);
                it = G.streams.erase(it);
            } else {
                ++it;
            }
        }
        for (auto it = G.events.begin(); it != G.events.end();) {
            it = it->second->device == device ? G.events.erase(it) : std::next(it);
        }
    }
    for (const std::shared_ptr<Stream>& s : gone) stopStream(s);
    free_all_device_memory(device);
    {
        std::lock_guard<std::mutex> lock(G.stickyMutex);
        G.sticky[device] = OK;
    }
    Context* c = primary_context(device);
    c->driverRefs = 0;
    c->runtimeActive = false;
    return OK;
}

}  // namespace standin
