// The kernels of src/main/cuda compiled as C++ for the emulator (the unity file write-unity.sh
// makes, exactly what nvcc compiles), and the stand-in driver's table of them: one trampoline per
// kernel, instantiated from the kernel's own C signature, listed in standin_kernels.inc (written
// by the Java build from the sources: name, then for each parameter the index of the dtype-code
// argument of a void* buffer, or -1).
#include "cuda_emu.h"

#include "fsdp4j_kernels.cu"

#include <string.h>

#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu_launch.h"
#include "kernels.h"

namespace standin {

namespace {

template <typename E>
const char* pointer_type() {
    if (std::is_same<E, float>::value) return "float*";
    if (std::is_same<E, double>::value) return "double*";
    if (std::is_same<E, int>::value) return "int*";
    return "a typed pointer";
}

// The element size of a DT_* code (common.cuh), or 0 for a code that is none.
size_t dtype_bytes(int code) {
    switch (code) {
        case DT_F32: return 4;
        case DT_F16: return 2;
        case DT_BF16: return 2;
        case DT_I32: return 4;
        default: return 0;
    }
}

template <typename... P, size_t... I>
BoundKernel bind_params(void (*kernel)(P...), void** params, const int* dtIndex, std::index_sequence<I...>) {
    BoundKernel b;
    std::tuple<P...> values(*static_cast<P*>(params[I])...);   // the values, copied now
    auto inspect = [&](auto idx) {
        constexpr size_t i = decltype(idx)::value;
        using T = std::tuple_element_t<i, std::tuple<P...>>;
        if constexpr (std::is_pointer<T>::value) {
            using E = std::remove_cv_t<std::remove_pointer_t<T>>;
            PointerArgument a{static_cast<int>(i), reinterpret_cast<uintptr_t>(std::get<i>(values)), 0, ""};
            if constexpr (std::is_void<E>::value) {
                int code = dtIndex[i] >= 0 ? *static_cast<int*>(params[dtIndex[i]]) : -1;
                a.align = dtype_bytes(code);
                a.type = "void* (dtype code " + std::to_string(code) + " in argument " + std::to_string(dtIndex[i]) + ")";
                if (a.align == 0 && b.error.empty()) {
                    b.error = "argument " + std::to_string(dtIndex[i]) + " is dtype code " + std::to_string(code) +
                              ", which is none of DT_F32, DT_F16, DT_BF16, DT_I32";
                }
            } else {
                a.align = alignof(E);
                a.type = pointer_type<E>();
            }
            b.pointers.push_back(a);
        }
    };
    (inspect(std::integral_constant<size_t, I>{}), ...);
    b.run = [kernel, values] { std::apply(kernel, values); };
    return b;
}

template <typename... P>
BoundKernel bind(void (*kernel)(P...), void** params, const int* dtIndex, size_t listed) {
    if (listed != sizeof...(P)) {
        BoundKernel b;
        b.error = "the kernel table lists " + std::to_string(listed) + " parameters, the kernel declares " +
                  std::to_string(sizeof...(P)) + ": rebuild the stand-ins";
        return b;
    }
    if (sizeof...(P) > 0 && params == nullptr) {
        BoundKernel b;
        b.error = "kernelParams is NULL for a kernel with " + std::to_string(sizeof...(P)) + " parameters";
        return b;
    }
    return bind_params(kernel, params, dtIndex, std::index_sequence_for<P...>{});
}

std::mutex emulator;   // the emulator runs one launch at a time

}  // namespace

const KernelEntry kernel_table[] = {
#define STANDIN_KERNEL(name, ...)                                                  \
    {#name, [](void** p) {                                                         \
         static const int dt[] = {__VA_ARGS__};                                    \
         return bind(&name, p, dt, sizeof dt / sizeof dt[0]);                      \
     }},
#include "standin_kernels.inc"
#undef STANDIN_KERNEL
};

const size_t kernel_count = sizeof kernel_table / sizeof kernel_table[0];

const KernelEntry* find_kernel(const char* name) {
    for (size_t i = 0; i < kernel_count; i++) {
        if (strcmp(kernel_table[i].name, name) == 0) return &kernel_table[i];
    }
    return nullptr;
}

bool run_emulated(const char* name, unsigned gridX, unsigned gridY, unsigned blockX, unsigned blockY,
                  const std::function<void()>& run, std::string* error) {
    // Threads and blocks in ascending order: the emulator tests cover the other orders.
    static const emu::Schedule schedule{"asc", emu::Order::ASCENDING, 0, 1, 0xff};
    std::lock_guard<std::mutex> lock(emulator);
    emu::LaunchError failure;
    if (emu::launch(name, emu::Dim{gridX, gridY}, emu::Dim{blockX, blockY}, schedule, run, &failure)) return true;
    *error = failure.what;
    return false;
}

}  // namespace standin
