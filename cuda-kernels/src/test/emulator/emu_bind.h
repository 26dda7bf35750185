// Binds an extern "C" kernel to one launch of a plan: each plan argument is decoded into the C
// type the kernel declares (a buffer reference into a pointer of the emulated device memory, or
// an int, long long or float), so an argument of the wrong kind fails before anything runs.
#pragma once

#include <stdint.h>
#include <string.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace emu {

// One argument as the plan writes it: 'p' buffer + byte offset, 'n' a null pointer (an optional
// operand left out, e.g. an embedding without positions), 'i' int, 'l' long long, 'f' float.
struct PlanArg {
    char kind;
    int buffer;
    uint64_t offset;
    int64_t integer;
    uint32_t floatBits;
};

// The emulated device memory of one run: one exactly sized host allocation per plan buffer,
// so an access past a buffer's end lands in AddressSanitizer's redzone.
struct DeviceMemory {
    std::vector<std::vector<unsigned char>> buffers;

    void* at(int buffer, uint64_t offset) {
        if (buffer < 0 || static_cast<size_t>(buffer) >= buffers.size() || offset > buffers[buffer].size()) {
            throw std::runtime_error("pointer argument to buffer " + std::to_string(buffer) + " + " +
                                     std::to_string(offset) + " is outside every buffer");
        }
        return buffers[buffer].data() + offset;
    }
};

using Launchable = std::function<void()>;
using Binder = std::function<Launchable(const std::vector<PlanArg>&, DeviceMemory&)>;

struct KernelEntry {
    const char* name;
    Binder bind;
};

extern const KernelEntry kernel_table[];
extern const size_t kernel_count;

template <typename T>
struct no_plan_encoding : std::false_type {};

inline void expect_kind(const PlanArg& a, char kind, size_t i) {
    if (a.kind != kind) {
        throw std::runtime_error("argument " + std::to_string(i) + " is '" + std::string(1, a.kind) +
                                 "' in the plan, the kernel declares '" + std::string(1, kind) + "'");
    }
}

template <typename T>
T decode(const PlanArg& a, DeviceMemory& memory, size_t i) {
    if constexpr (std::is_pointer<T>::value) {
        if (a.kind == 'n') return nullptr;
        expect_kind(a, 'p', i);
        return static_cast<T>(memory.at(a.buffer, a.offset));
    } else if constexpr (std::is_same<T, int>::value) {
        expect_kind(a, 'i', i);
        return static_cast<int>(a.integer);
    } else if constexpr (std::is_same<T, long long>::value) {
        expect_kind(a, 'l', i);
        return static_cast<long long>(a.integer);
    } else if constexpr (std::is_same<T, float>::value) {
        expect_kind(a, 'f', i);
        float f;
        memcpy(&f, &a.floatBits, sizeof f);
        return f;
    } else {
        static_assert(no_plan_encoding<T>::value, "a kernel parameter type the plan cannot encode");
    }
}

template <typename... P, size_t... I>
std::tuple<P...> decode_all(const std::vector<PlanArg>& args, DeviceMemory& memory, std::index_sequence<I...>) {
    return std::tuple<P...>(decode<P>(args[I], memory, I)...);
}

template <typename... P>
Binder bind(void (*kernel)(P...)) {
    return [kernel](const std::vector<PlanArg>& args, DeviceMemory& memory) -> Launchable {
        if (args.size() != sizeof...(P)) {
            throw std::runtime_error(std::to_string(args.size()) + " arguments in the plan, the kernel declares " +
                                     std::to_string(sizeof...(P)));
        }
        std::tuple<P...> values = decode_all<P...>(args, memory, std::index_sequence_for<P...>{});
        return [kernel, values] { std::apply(kernel, values); };
    };
}

}  // namespace emu
