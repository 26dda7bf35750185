// The stand-in runtime API (libcudart.so.13, every symbol versioned libcudart.so.13 as the real
// one's): the calls the CUDA backend makes, on the core of the stand-in driver. Checked as the
// runtime checks, and strict where CUDA leaves a mistake to fail later or never: every device
// range a copy touches must lie in one live allocation of the right device, a stream must belong
// to the current device, an event to its stream's device, and nothing may call CUDA from inside a
// host function. A copy from pageable memory is staged when the call is made and a copy into it
// completes before the call returns, as the real runtime's do.
#include <chrono>
#include <string.h>

#include "device_prop.h"
#include "standin.h"

using namespace standin;

namespace {

// Every runtime call ends here: the code becomes the thread's last error unless it is a success
// (cudaGetLastError returns and clears it).
int done(int rc) {
    if (rc != OK && rc != NOT_READY) thread_state().lastError = rc;
    return rc;
}

// The runtime's initialisation, which the real one refuses on a driver of an older CUDA major.
int start() {
    return driver_version() < 13000 ? INSUFFICIENT_DRIVER : init();
}

// The calling thread's device, checked for a sticky fault and for a host function around it.
int enter(int* device) {
    if (in_host_function()) return NOT_PERMITTED;
    if (int rc = start()) return rc;
    runtime_device(device);
    return sticky_error(*device);
}

std::string hex(const void* p) {
    char b[32];
    snprintf(b, sizeof b, "%p", p);
    return b;
}

// The stream of a call that enqueues work: live, and of the current device.
int stream_of(const char* call, void* handle, int device, std::shared_ptr<Stream>* s) {
    if (resolve_stream(handle, s) != OK) {
        report(std::string(call) + ": " + hex(handle) + " is not a live stream");
        return INVALID_HANDLE;
    }
    if ((*s)->device != device) {
        report(std::string(call) + ": the stream belongs to cuda:" + std::to_string((*s)->device) +
               ", the current device is cuda:" + std::to_string(device));
        return INVALID_HANDLE;
    }
    return OK;
}

bool is_device(const void* p) {
    Allocation a;
    return find_allocation(reinterpret_cast<uintptr_t>(p), &a) && a.kind == MemKind::DEVICE;
}

bool is_pinned(const void* p, size_t bytes) {
    Allocation a;
    uintptr_t u = reinterpret_cast<uintptr_t>(p);
    return find_allocation(u, &a) && a.kind == MemKind::PINNED_HOST && !a.freed && u + bytes <= a.base + a.bytes;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ devices

int cudaGetDeviceCount(int* count) {
    if (count == nullptr) return done(INVALID_VALUE);
    *count = 0;
    if (int rc = start()) return done(rc);
    *count = device_count();
    return OK;
}

int cudaSetDevice(int device) {
    if (in_host_function()) return done(NOT_PERMITTED);
    if (int rc = start()) return done(rc);
    return done(set_runtime_device(device));
}

int cudaGetDevice(int* device) {
    if (device == nullptr) return done(INVALID_VALUE);
    if (int rc = start()) return done(rc);
    return done(runtime_device(device));
}

int cudaGetDeviceProperties(void* out, int device) {
    if (int rc = start()) return done(rc);
    if (out == nullptr) return done(INVALID_VALUE);
    if (device < 0 || device >= device_count()) return done(INVALID_DEVICE);
    DeviceProp p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "stand-in CUDA, not a GPU");
    p.uuid[0] = static_cast<unsigned char>(device + 1);
    p.totalGlobalMem = device_memory_bytes();
    p.sharedMemPerBlock = 48 * 1024;
    p.regsPerBlock = 65536;
    p.warpSize = 32;
    p.memPitch = 2147483647;
    p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim[0] = 1024;
    p.maxThreadsDim[1] = 1024;
    p.maxThreadsDim[2] = 64;
    p.maxGridSize[0] = 2147483647;
    p.maxGridSize[1] = 65535;
    p.maxGridSize[2] = 65535;
    p.totalConstMem = 65536;
    p.major = 9;                    // an H100 SXM's limits
    p.minor = 0;
    p.textureAlignment = 512;
    p.texturePitchAlignment = 32;
    p.multiProcessorCount = 132;
    p.canMapHostMemory = 1;
    p.concurrentKernels = 1;
    p.pciBusID = device + 1;
    p.asyncEngineCount = 1;
    p.unifiedAddressing = 1;
    p.memoryBusWidth = 5120;
    p.l2CacheSize = 50 * 1024 * 1024;
    p.maxThreadsPerMultiProcessor = 2048;
    p.sharedMemPerMultiprocessor = 228 * 1024;
    p.regsPerMultiprocessor = 65536;
    p.managedMemory = 1;
    p.cooperativeLaunch = 1;
    p.sharedMemPerBlockOptin = 227 * 1024;
    p.maxBlocksPerMultiProcessor = 32;
    p.hostNumaId = -1;
    p.deviceNumaId = -1;
    memcpy(out, &p, sizeof p);
    return OK;
}

int cudaDeviceSynchronize() {
    int device;
    if (int rc = enter(&device)) return done(rc);
    return done(synchronize_device(device));
}

int cudaDeviceReset() {
    if (in_host_function()) return done(NOT_PERMITTED);
    if (int rc = start()) return done(rc);
    int device;
    runtime_device(&device);
    thread_state().lastError = OK;
    return reset_device(device);
}

int cudaMemGetInfo(size_t* free, size_t* total) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (free == nullptr || total == nullptr) return done(INVALID_VALUE);
    *total = device_memory_bytes();
    *free = *total - device_bytes_in_use(device);
    return OK;
}

int cudaRuntimeGetVersion(int* version) {
    if (version == nullptr) return done(INVALID_VALUE);
    *version = 13010;
    return OK;
}

int cudaDriverGetVersion(int* version) {
    if (version == nullptr) return done(INVALID_VALUE);
    *version = driver_version();
    return OK;
}

// ------------------------------------------------------------------ errors

int cudaGetLastError() {
    ThreadState& ts = thread_state();
    int rc = ts.lastError;
    ts.lastError = OK;
    return rc;
}

int cudaPeekAtLastError() {
    return thread_state().lastError;
}

const char* cudaGetErrorName(int error) {
    return runtime_error_name(error);
}

const char* cudaGetErrorString(int error) {
    return error_text(error);
}

// ------------------------------------------------------------------ memory

int cudaMalloc(void** ptr, size_t bytes) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (ptr == nullptr) return done(INVALID_VALUE);
    return done(malloc_device(device, bytes, ptr));
}

int cudaFree(void* ptr) {
    int device;
    if (int rc = enter(&device)) return done(rc);   // cudaFree(NULL) initialises the context
    return done(free_device(ptr));
}

int cudaMallocHost(void** ptr, size_t bytes) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (ptr == nullptr) return done(INVALID_VALUE);
    return done(malloc_pinned(bytes, ptr));
}

int cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
    if (flags > 0xf) return done(INVALID_VALUE);
    return cudaMallocHost(ptr, bytes);
}

int cudaFreeHost(void* ptr) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    return done(free_pinned(ptr));
}

// Device to device only (what fsdp4j uses it for: re-pitching a GEMM operand); other kinds are
// refused with a report rather than half-emulated.
int cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                      int kind, void* stream) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    std::shared_ptr<Stream> s;
    if (int rc = stream_of("cudaMemcpy2DAsync", stream, device, &s)) return done(rc);
    if (width == 0 || height == 0) return OK;
    if (dst == nullptr || src == nullptr || width > dpitch || width > spitch) return done(INVALID_VALUE);
    if (kind == 4 && is_device(src) && is_device(dst)) kind = 3;
    if (kind != 3) {
        report("cudaMemcpy2DAsync: the stand-in copies device to device only (kind " + std::to_string(kind) + ")");
        return done(INVALID_MEMCPY_DIRECTION);
    }
    size_t srcBytes = spitch * (height - 1) + width, dstBytes = dpitch * (height - 1) + width;
    std::string why = check_device_range(s->device, reinterpret_cast<uintptr_t>(src), srcBytes, 1, "the source");
    if (why.empty()) why = check_device_range(s->device, reinterpret_cast<uintptr_t>(dst), dstBytes, 1, "the destination");
    if (!why.empty()) {
        report("cudaMemcpy2DAsync(" + std::to_string(width) + " x " + std::to_string(height) + " bytes): " + why);
        return done(INVALID_VALUE);
    }
    return done(enqueue(s, "cudaMemcpy2DAsync", [dst, dpitch, src, spitch, width, height] {
        for (size_t r = 0; r < height; r++) {
            memcpy(static_cast<unsigned char*>(dst) + r * dpitch, static_cast<const unsigned char*>(src) + r * spitch,
                   width);
        }
        return OK;
    }));
}

int cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, void* stream) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    std::shared_ptr<Stream> s;
    if (int rc = stream_of("cudaMemcpyAsync", stream, device, &s)) return done(rc);
    if (bytes == 0) return OK;
    if (dst == nullptr || src == nullptr) return done(INVALID_VALUE);
    if (kind == 4) {   // cudaMemcpyDefault: from where the pointers are
        bool sd = is_device(src), dd = is_device(dst);
        kind = sd ? (dd ? 3 : 2) : (dd ? 1 : 0);
    }
    if (kind < 0 || kind > 3) return done(INVALID_MEMCPY_DIRECTION);
    bool fromDevice = kind == 2 || kind == 3;
    bool toDevice = kind == 1 || kind == 3;
    // Device ranges must lie in live allocations of the stream's device.
    std::string why;
    if (fromDevice) why = check_device_range(s->device, reinterpret_cast<uintptr_t>(src), bytes, 1, "the source");
    if (why.empty() && toDevice) {
        why = check_device_range(s->device, reinterpret_cast<uintptr_t>(dst), bytes, 1, "the destination");
    }
    if (why.empty() && !fromDevice && is_device(src)) why = "the source is device memory, the copy's kind says host";
    if (why.empty() && !toDevice && is_device(dst)) why = "the destination is device memory, the copy's kind says host";
    if (!why.empty()) {
        report("cudaMemcpyAsync(" + std::to_string(bytes) + " bytes, kind " + std::to_string(kind) + "): " + why);
        return done(INVALID_VALUE);
    }
    std::string label = "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes, kind " + std::to_string(kind) + ")";
    if (!fromDevice && !is_pinned(src, bytes)) {
        // pageable source: staged now, so the caller may reuse it at once (the real runtime's rule)
        auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                                  static_cast<const unsigned char*>(src) + bytes);
        return done(enqueue(s, label, [dst, staged] {
            memcpy(dst, staged->data(), staged->size());
            return OK;
        }));
    }
    int rc = enqueue(s, label, [dst, src, bytes] {
        memcpy(dst, src, bytes);
        return OK;
    });
    if (rc == OK && !toDevice && !is_pinned(dst, bytes)) {
        rc = synchronize_stream(s);   // pageable destination: the copy is done when the call returns
    }
    return done(rc);
}

int cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
    int rc = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
    if (rc != OK) return rc;
    std::shared_ptr<Stream> s;
    resolve_stream(nullptr, &s);
    return done(synchronize_stream(s));
}

int cudaMemsetAsync(void* ptr, int value, size_t bytes, void* stream) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    std::shared_ptr<Stream> s;
    if (int rc = stream_of("cudaMemsetAsync", stream, device, &s)) return done(rc);
    if (bytes == 0) return OK;
    std::string why = check_device_range(s->device, reinterpret_cast<uintptr_t>(ptr), bytes, 1, "the destination");
    if (!why.empty()) {
        report("cudaMemsetAsync(" + std::to_string(bytes) + " bytes): " + why);
        return done(INVALID_VALUE);
    }
    return done(enqueue(s, "cudaMemsetAsync(" + std::to_string(bytes) + " bytes)", [ptr, value, bytes] {
        memset(ptr, value, bytes);
        return OK;
    }));
}

// ------------------------------------------------------------------ streams

int cudaStreamCreateWithFlags(void** stream, unsigned flags) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (stream == nullptr || flags > 1) return done(INVALID_VALUE);
    return done(create_stream(device, flags, stream));
}

int cudaStreamCreate(void** stream) {
    return cudaStreamCreateWithFlags(stream, 0);
}

int cudaStreamDestroy(void* stream) {
    if (in_host_function()) return done(NOT_PERMITTED);
    if (stream == nullptr || stream == reinterpret_cast<void*>(0x1)) return done(INVALID_HANDLE);
    return done(destroy_stream(stream));
}

int cudaStreamSynchronize(void* stream) {
    if (in_host_function()) return done(NOT_PERMITTED);
    std::shared_ptr<Stream> s;
    if (resolve_stream(stream, &s) != OK) return done(INVALID_HANDLE);
    return done(synchronize_stream(s));
}

int cudaStreamQuery(void* stream) {
    std::shared_ptr<Stream> s;
    if (resolve_stream(stream, &s) != OK) return done(INVALID_HANDLE);
    if (int sticky = sticky_error(s->device)) return done(sticky);
    std::lock_guard<std::mutex> lock(s->m);
    return s->completed == s->enqueued ? OK : NOT_READY;
}

int cudaStreamWaitEvent(void* stream, void* event, unsigned flags) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (flags != 0) return done(INVALID_VALUE);
    std::shared_ptr<Stream> s;
    if (int rc = stream_of("cudaStreamWaitEvent", stream, device, &s)) return done(rc);
    std::shared_ptr<Event> e;
    if (resolve_event(event, &e) != OK) {
        report("cudaStreamWaitEvent: " + hex(event) + " is not a live event");
        return done(INVALID_HANDLE);
    }
    Dependency at;
    {
        std::lock_guard<std::mutex> lock(e->m);
        if (!e->recorded) return OK;   // waiting for an event never recorded waits for nothing
        at = e->at;
    }
    // Events of another device are fine here: a stream may wait for any device's work.
    return done(enqueue(s, "cudaStreamWaitEvent", [] { return OK; }, {at}));
}

typedef void (*HostFn)(void*);

int cudaLaunchHostFunc(void* stream, HostFn fn, void* userData) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (fn == nullptr) return done(INVALID_VALUE);
    std::shared_ptr<Stream> s;
    if (int rc = stream_of("cudaLaunchHostFunc", stream, device, &s)) return done(rc);
    int d = s->device;
    return done(enqueue(s, "cudaLaunchHostFunc", [fn, userData, d] {
        run_host_function(d, [fn, userData] { fn(userData); });
        return OK;
    }));
}

// ------------------------------------------------------------------ events

int cudaEventCreateWithFlags(void** event, unsigned flags) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    if (event == nullptr || flags > 0xf) return done(INVALID_VALUE);
    return done(create_event(device, flags, event));
}

int cudaEventCreate(void** event) {
    return cudaEventCreateWithFlags(event, 0);
}

int cudaEventRecord(void* event, void* stream) {
    int device;
    if (int rc = enter(&device)) return done(rc);
    std::shared_ptr<Event> e;
    if (resolve_event(event, &e) != OK) {
        report("cudaEventRecord: " + hex(event) + " is not a live event");
        return done(INVALID_HANDLE);
    }
    std::shared_ptr<Stream> s;
    if (int rc = stream_of("cudaEventRecord", stream, device, &s)) return done(rc);
    if (e->device != s->device) {
        report("cudaEventRecord: the event belongs to cuda:" + std::to_string(e->device) + ", the stream to cuda:" +
               std::to_string(s->device));
        return done(INVALID_HANDLE);
    }
    if ((e->flags & 2u) == 0) {   // a timing event: its stream stamps the time when it gets there
        uint64_t generation;
        {
            std::lock_guard<std::mutex> elock(e->m);
            generation = ++e->generation;
            e->stampNs = -1;
        }
        uint64_t seq = 0;
        int rc = enqueue(s, "cudaEventRecord", [e, generation] {
            std::lock_guard<std::mutex> elock(e->m);
            if (e->generation == generation) {
                e->stampNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch()).count();
            }
            return OK;
        }, {}, &seq);
        if (rc != OK) return done(rc);
        std::lock_guard<std::mutex> elock(e->m);
        e->at = {s, seq};
        e->recorded = true;
        return OK;
    }
    std::lock_guard<std::mutex> elock(e->m);
    std::lock_guard<std::mutex> slock(s->m);
    e->at = {s, s->enqueued};
    e->recorded = true;
    return OK;
}

// The time between two timing events, once the GPU has passed both (else NOT_READY).
int cudaEventElapsedTime(float* ms, void* start, void* end) {
    if (ms == nullptr) return done(INVALID_VALUE);
    std::shared_ptr<Event> a, b;
    if (resolve_event(start, &a) != OK || resolve_event(end, &b) != OK) return done(INVALID_HANDLE);
    if (((a->flags | b->flags) & 2u) != 0) {
        report("cudaEventElapsedTime: an event created with cudaEventDisableTiming has no timestamp");
        return done(INVALID_HANDLE);
    }
    int64_t t[2];
    const std::shared_ptr<Event>* both[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        const std::shared_ptr<Event>& e = *both[i];
        Dependency at;
        {
            std::lock_guard<std::mutex> lock(e->m);
            if (!e->recorded) return done(INVALID_HANDLE);
            at = e->at;
        }
        {
            std::lock_guard<std::mutex> lock(at.stream->m);
            if (at.stream->completed < at.seq) return NOT_READY;
        }
        std::lock_guard<std::mutex> lock(e->m);
        t[i] = e->stampNs;
    }
    if (t[0] < 0 || t[1] < 0) return NOT_READY;
    *ms = static_cast<float>((t[1] - t[0]) / 1e6);
    return OK;
}

int cudaEventQuery(void* event) {
    if (in_host_function()) return done(NOT_PERMITTED);
    std::shared_ptr<Event> e;
    if (resolve_event(event, &e) != OK) return done(INVALID_HANDLE);
    if (int sticky = sticky_error(e->device)) return done(sticky);
    Dependency at;
    {
        std::lock_guard<std::mutex> lock(e->m);
        if (!e->recorded) return OK;
        at = e->at;
    }
    std::lock_guard<std::mutex> lock(at.stream->m);
    return at.stream->completed >= at.seq ? OK : NOT_READY;
}

int cudaEventSynchronize(void* event) {
    if (in_host_function()) return done(NOT_PERMITTED);
    std::shared_ptr<Event> e;
    if (resolve_event(event, &e) != OK) return done(INVALID_HANDLE);
    Dependency at;
    {
        std::lock_guard<std::mutex> lock(e->m);
        if (!e->recorded) return OK;
        at = e->at;
    }
    wait_for(at);
    return done(sticky_error(e->device));
}

int cudaEventDestroy(void* event) {
    if (in_host_function()) return done(NOT_PERMITTED);
    return done(destroy_event(event));
}

}  // extern "C"
