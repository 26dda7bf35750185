// The stand-in driver API (libcuda.so.1): initialisation, devices, primary contexts, modules and
// cuLaunchKernel, which hands the launch's grid, block and argument values to the emulator-built
// kernel of that name (kernels.h) on the stream's worker. Checked as the driver checks: a launch
// needs a current context, a function of a module loaded in it, a stream of its device, and a
// grid and block within an H100's limits. At run time every pointer argument must be device memory
// of the launch's device, live and aligned to its elements, or the launch faults as a GPU would
// (illegal or misaligned address, sticky); after the kernel, the guard bytes of those allocations
// are checked.
#include <string.h>

#include <map>
#include <sstream>

#include "kernels.h"
#include "standin.h"

namespace standin {
namespace {

// The fatbin nvcc writes starts with this magic; a cubin is an ELF file; the stand-in image (what
// the tests put on the class path when the build had no nvcc) starts with a line of its own.
constexpr unsigned char FATBIN_MAGIC[4] = {0x50, 0xed, 0x55, 0xba};
constexpr char STANDIN_IMAGE[] = "fsdp4j stand-in kernel image\n";

struct Module {
    int device;
    std::string image;         // kept to look names up in
    bool standInImage;
};

struct Function {
    Module* module;
    const KernelEntry* kernel;
};

const char* const MODULE = "CUmodule";
const char* const FUNCTION = "CUfunction";

std::mutex modulesMutex;
std::map<Module*, std::vector<Function*>> functions;

// Driver calls need cuInit (or the runtime's initialisation) first.
int ready() {
    return initialized() ? OK : NOT_INITIALIZED;
}

std::string hex(uintptr_t p) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(p));
    return b;
}

// Whether `name` is in the image as a NUL-terminated string (a cubin's symbol and section names
// are); an image compressed by nvcc shows none of our names, and is then taken on trust.
bool image_names(const Module& m, const char* name) {
    std::string key = std::string(name) + '\0';
    if (m.image.find(key) != std::string::npos) return true;
    if (m.standInImage) return false;
    for (size_t i = 0; i < kernel_count; i++) {
        if (m.image.find(std::string(kernel_table[i].name) + '\0') != std::string::npos) return false;
    }
    return true;
}

}  // namespace
}  // namespace standin

using namespace standin;

extern "C" {

int cuInit(unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    return init();
}

int cuDriverGetVersion(int* version) {
    if (version == nullptr) return INVALID_VALUE;
    *version = driver_version();
    return OK;
}

int cuDeviceGetCount(int* count) {
    if (int rc = ready()) return rc;
    if (count == nullptr) return INVALID_VALUE;
    *count = device_count();
    return OK;
}

int cuDeviceGet(int* device, int ordinal) {
    if (int rc = ready()) return rc;
    if (device == nullptr) return INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count()) return INVALID_DEVICE;
    *device = ordinal;
    return OK;
}

int cuDevicePrimaryCtxRetain(void** pctx, int device) {
    if (int rc = ready()) return rc;
    if (pctx == nullptr) return INVALID_VALUE;
    if (device < 0 || device >= device_count()) return INVALID_DEVICE;
    Context* c = primary_context(device);
    c->driverRefs++;
    *pctx = c;
    return OK;
}

int cuDevicePrimaryCtxRelease_v2(int device) {
    if (int rc = ready()) return rc;
    if (device < 0 || device >= device_count()) return INVALID_DEVICE;
    Context* c = primary_context(device);
    int refs = c->driverRefs.load();
    do {
        if (refs <= 0) {
            report("cuDevicePrimaryCtxRelease(" + std::to_string(device) + "): released more often than retained");
            return INVALID_CONTEXT;
        }
    } while (!c->driverRefs.compare_exchange_weak(refs, refs - 1));
    return OK;
}

int cuCtxSetCurrent(void* ctx) {
    if (int rc = ready()) return rc;
    if (ctx != nullptr && !is_context(ctx)) return INVALID_CONTEXT;
    Context* c = static_cast<Context*>(ctx);
    if (c != nullptr && c->driverRefs == 0 && !c->runtimeActive) {
        report("cuCtxSetCurrent: the primary context of cuda:" + std::to_string(c->device) + " is not retained");
        return INVALID_CONTEXT;
    }
    thread_state().ctx = c;
    return OK;
}

int cuCtxGetCurrent(void** ctx) {
    if (int rc = ready()) return rc;
    if (ctx == nullptr) return INVALID_VALUE;
    *ctx = current_context();
    return OK;
}

int cuModuleLoadData(void** module, const void* image) {
    if (int rc = ready()) return rc;
    if (module == nullptr || image == nullptr) return INVALID_VALUE;
    Context* c = current_context();
    if (c == nullptr) return INVALID_CONTEXT;
    if (int sticky = sticky_error(c->device)) return sticky;
    const unsigned char* bytes = static_cast<const unsigned char*>(image);
    auto* m = new Module;
    m->device = c->device;
    if (memcmp(bytes, FATBIN_MAGIC, 4) == 0) {
        // header: magic, version (2), header size (2), size of the rest (8)
        uint16_t headerBytes;
        uint64_t restBytes;
        memcpy(&headerBytes, bytes + 6, 2);
        memcpy(&restBytes, bytes + 8, 8);
        m->image.assign(reinterpret_cast<const char*>(bytes), headerBytes + restBytes);
        m->standInImage = false;
    } else if (memcmp(bytes, "\x7f" "ELF", 4) == 0) {
        report("cuModuleLoadData: a bare cubin; the stand-in takes nvcc's fatbin or its own image");
        delete m;
        return INVALID_IMAGE;
    } else if (memcmp(bytes, STANDIN_IMAGE, sizeof STANDIN_IMAGE - 1) == 0) {
        m->image = reinterpret_cast<const char*>(bytes);   // NUL-terminated text: names, one a line
        for (char& ch : m->image) {
            if (ch == '\n') ch = '\0';
        }
        m->image += '\0';
        m->standInImage = true;
    } else {
        report("cuModuleLoadData: the image is neither a fatbin nor the stand-in's kernel image");
        delete m;
        return INVALID_IMAGE;
    }
    register_handle(MODULE, m);
    {
        std::lock_guard<std::mutex> lock(modulesMutex);
        functions[m];
    }
    *module = m;
    return OK;
}

int cuModuleGetFunction(void** function, void* module, const char* name) {
    if (int rc = ready()) return rc;
    if (function == nullptr || name == nullptr) return INVALID_VALUE;
    if (!is_handle(MODULE, module)) return INVALID_HANDLE;
    Module* m = static_cast<Module*>(module);
    const KernelEntry* k = find_kernel(name);
    if (k == nullptr || !image_names(*m, name)) {
        report(std::string("cuModuleGetFunction: no kernel named ") + name + " in the module" +
               (k == nullptr ? " (nor in the stand-in's emulator build)" : ""));
        return NOT_FOUND;
    }
    auto* f = new Function{m, k};
    register_handle(FUNCTION, f);
    std::lock_guard<std::mutex> lock(modulesMutex);
    functions[m].push_back(f);
    *function = f;
    return OK;
}

int cuModuleUnload(void* module) {
    if (int rc = ready()) return rc;
    if (!is_handle(MODULE, module)) return INVALID_HANDLE;
    Module* m = static_cast<Module*>(module);
    synchronize_device(m->device);   // launches already queued still run
    unregister_handle(MODULE, m);
    std::lock_guard<std::mutex> lock(modulesMutex);
    for (Function* f : functions[m]) {
        unregister_handle(FUNCTION, f);   // kept allocated: a stale handle must not be reused
    }
    functions.erase(m);
    return OK;
}

int cuLaunchKernel(void* function, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX, unsigned blockY,
                   unsigned blockZ, unsigned sharedMemBytes, void* stream, void** kernelParams, void** extra) {
    if (int rc = ready()) return rc;
    if (in_host_function()) return NOT_PERMITTED;
    Context* c = current_context();
    if (c == nullptr) return INVALID_CONTEXT;
    if (!is_handle(FUNCTION, function)) return INVALID_HANDLE;
    Function* f = static_cast<Function*>(function);
    const char* name = f->kernel->name;
    if (f->module->device != c->device) {
        report(std::string("cuLaunchKernel(") + name + "): the function belongs to cuda:" +
               std::to_string(f->module->device) + "'s context, cuda:" + std::to_string(c->device) + "'s is current");
        return INVALID_CONTEXT;
    }
    if (int sticky = sticky_error(c->device)) return sticky;
    std::shared_ptr<Stream> s;
    if (resolve_stream(stream, &s) != OK) return INVALID_HANDLE;
    if (s->device != c->device) {
        report(std::string("cuLaunchKernel(") + name + "): the stream belongs to cuda:" + std::to_string(s->device) +
               ", the current context is cuda:" + std::to_string(c->device) + "'s");
        return INVALID_HANDLE;
    }
    // An H100's limits (cudaGetDeviceProperties says the same).
    unsigned long long threads = 1ull * blockX * blockY * blockZ;
    if (gridX == 0 || gridY == 0 || gridZ == 0 || blockX == 0 || blockY == 0 || blockZ == 0 || gridX > 2147483647u ||
        gridY > 65535 || gridZ > 65535 || blockX > 1024 || blockY > 1024 || blockZ > 64 || threads > 1024) {
        report(std::string("cuLaunchKernel(") + name + "): grid (" + std::to_string(gridX) + ", " +
               std::to_string(gridY) + ", " + std::to_string(gridZ) + "), block (" + std::to_string(blockX) + ", " +
               std::to_string(blockY) + ", " + std::to_string(blockZ) + ") is outside the device's limits");
        return INVALID_VALUE;
    }
    if (sharedMemBytes > 48 * 1024) return INVALID_VALUE;
    if (sharedMemBytes > 0 || gridZ != 1 || blockZ != 1 || extra != nullptr) {
        report(std::string("cuLaunchKernel(") + name + "): dynamic shared memory, 3-D launches and 'extra' are not"
               " emulated by the stand-in");
        return NOT_SUPPORTED;
    }
    BoundKernel bound = f->kernel->bind(kernelParams);
    if (!bound.error.empty()) {
        report(std::string("cuLaunchKernel(") + name + "): " + bound.error);
        return INVALID_VALUE;
    }
    int device = c->device;
    std::ostringstream what;
    what << name << " <<<(" << gridX << ", " << gridY << "), (" << blockX << ", " << blockY << ")>>>";
    std::string label = what.str();
    return enqueue(s, label, [bound, device, label, gridX, gridY, blockX, blockY]() -> int {
        for (const PointerArgument& p : bound.pointers) {
            if (p.value == 0) {
                continue;   // a null argument is legal (an absent optional input); dereferencing it is not
            }
            std::string why = check_device_pointer(device, p.value, 1, "argument " + std::to_string(p.index) + " (" +
                                                                           p.type + ")");
            if (!why.empty()) {
                report(label + ": " + why);
                return ILLEGAL_ADDRESS;
            }
            if (p.value % p.align != 0) {
                report(label + ": argument " + std::to_string(p.index) + " (" + p.type + ") = " + hex(p.value) +
                       " is not aligned to its " + std::to_string(p.align) + "-byte elements");
                return MISALIGNED_ADDRESS;
            }
        }
        std::string error;
        if (!run_emulated(label.c_str(), gridX, gridY, blockX, blockY, bound.run, &error)) {
            report(label + ": " + error);
            return LAUNCH_FAILED;
        }
        for (const PointerArgument& p : bound.pointers) {
            std::string damage = p.value == 0 ? "" : check_guards(p.value);
            if (!damage.empty()) {
                report(label + ": argument " + std::to_string(p.index) + ": " + damage);
                return ILLEGAL_ADDRESS;
            }
        }
        return OK;
    });
}

int cuGetErrorName(int error, const char** str) {
    if (str == nullptr) return INVALID_VALUE;
    const char* n = driver_error_name(error);
    if (n == nullptr) {
        *str = nullptr;
        return INVALID_VALUE;
    }
    *str = n;
    return OK;
}

int cuGetErrorString(int error, const char** str) {
    if (str == nullptr) return INVALID_VALUE;
    if (driver_error_name(error) == nullptr) {
        *str = nullptr;
        return INVALID_VALUE;
    }
    *str = error_text(error);
    return OK;
}

}  // extern "C"
