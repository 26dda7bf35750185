// The stand-in cuBLAS (libcublas.so.13, symbols versioned libcublas.so.13): handles bound to a
// device and a stream, a workspace, and cublasGemmEx / cublasGemmStridedBatchedEx in the
// combinations CUBLAS_COMPUTE_32F takes (A and B of one type among fp32, fp16, bf16; C fp32 or
// A's type; fp32 with CUBLAS_COMPUTE_32F_FAST_TF32, whose operands are rounded to TF32 first),
// column-major as cuBLAS is. Arguments are checked when the call is made, as cuBLAS checks them
// (a leading dimension below the rows of the matrix as stored is CUBLAS_STATUS_INVALID_VALUE); the
// product runs in queue order on the handle's stream, in fp32 sums over k in order; its operands
// must then be device memory of the handle's device, aligned to their elements, or the GEMM faults
// as a GPU kernel would (sticky). beta = 0 leaves C unread, as cuBLAS does.
#include <string.h>

#include <sstream>
#include <vector>

#include "../emulator/fallback/cuda_bf16.h"
#include "../emulator/fallback/cuda_fp16.h"
#include "standin.h"

using namespace standin;

namespace {

enum Status : int {
    SUCCESS = 0,
    NOT_INITIALIZED_ = 1,
    ALLOC_FAILED = 3,
    INVALID_VALUE_ = 7,
    ARCH_MISMATCH = 8,
    MAPPING_ERROR = 11,
    EXECUTION_FAILED = 13,
    INTERNAL_ERROR = 14,
    NOT_SUPPORTED_ = 15,
    LICENSE_ERROR = 16,
};

constexpr int R_32F = 0, R_16F = 2, R_16BF = 14;
constexpr int COMPUTE_32F = 68, COMPUTE_32F_PEDANTIC = 69, COMPUTE_32F_FAST_TF32 = 77;

const char* const HANDLE = "cublasHandle_t";

struct Handle {
    int device;
    void* stream = nullptr;        // NULL: the legacy stream
    uintptr_t workspace = 0;       // 0: cuBLAS's own pool
    size_t workspaceBytes = 0;
};

int fail(int status, const std::string& call, const std::string& why) {
    report(call + ": " + why);
    return status;
}

size_t type_bytes(int type) {
    return type == R_32F ? 4 : 2;
}

const char* type_name(int type) {
    return type == R_32F ? "CUDA_R_32F" : type == R_16F ? "CUDA_R_16F" : type == R_16BF ? "CUDA_R_16BF" : "?";
}

float load(const void* base, int type, long long i) {
    switch (type) {
        case R_32F: return static_cast<const float*>(base)[i];
        case R_16F: return __half2float(static_cast<const __half*>(base)[i]);
        default: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    }
}

void store(void* base, int type, long long i, float v) {
    switch (type) {
        case R_32F: static_cast<float*>(base)[i] = v; break;
        case R_16F: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
        default: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
    }
}

// fp32 rounded to TF32 (10 explicit mantissa bits), to nearest with ties away, as cvt.rna.tf32.
float tf32(float x) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & ~0x1fffu;
    memcpy(&x, &bits, 4);
    return x;
}

struct Gemm {
    int transa, transb, m, n, k;
    float alpha, beta;
    const void* a;
    int atype, lda;
    long long strideA;
    const void* b;
    int btype, ldb;
    long long strideB;
    void* c;
    int ctype, ldc;
    long long strideC;
    int batch;
    bool tf32;
};

// Bytes from an operand's first element to one past its last, over every batch.
size_t extent(long long rows, long long cols, long long ld, long long stride, int batch, int type) {
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    long long last = (cols - 1) * ld + rows - 1 + static_cast<long long>(batch - 1) * stride;
    return static_cast<size_t>(last + 1) * type_bytes(type);
}

// The GEMM's checks that only the memory can answer, then the product; runs on the stream.
int run(const Gemm& g, int device, const std::string& label) {
    long long aRows = g.transa == 0 ? g.m : g.k, aCols = g.transa == 0 ? g.k : g.m;
    long long bRows = g.transb == 0 ? g.k : g.n, bCols = g.transb == 0 ? g.n : g.k;
    struct Operand {
        const char* name;
        uintptr_t p;
        size_t bytes;
        int type;
    } ops[] = {
        {"A", reinterpret_cast<uintptr_t>(g.a), extent(aRows, aCols, g.lda, g.strideA, g.batch, g.atype), g.atype},
        {"B", reinterpret_cast<uintptr_t>(g.b), extent(bRows, bCols, g.ldb, g.strideB, g.batch, g.btype), g.btype},
        {"C", reinterpret_cast<uintptr_t>(g.c), extent(g.m, g.n, g.ldc, g.strideC, g.batch, g.ctype), g.ctype},
    };
    for (const Operand& o : ops) {
        if (o.bytes == 0) continue;   // not read (k = 0)
        std::string why = check_device_range(device, o.p, o.bytes, 1, std::string("matrix ") + o.name);
        if (!why.empty()) {
            report(label + ": " + why);
            return ILLEGAL_ADDRESS;
        }
        if (o.p % type_bytes(o.type) != 0) {
            report(label + ": matrix " + o.name + " is not aligned to its " + std::to_string(type_bytes(o.type)) +
                   "-byte elements");
            return MISALIGNED_ADDRESS;
        }
    }
    std::vector<float> a(static_cast<size_t>(g.m) * g.k), b(static_cast<size_t>(g.n) * g.k);
    for (int batch = 0; batch < g.batch; batch++) {
        const long long offA = batch * g.strideA, offB = batch * g.strideB, offC = batch * g.strideC;
        for (int i = 0; i < g.m; i++) {   // op(A) row i, contiguous over p
            for (int p = 0; p < g.k; p++) {
                long long at = g.transa == 0 ? i + static_cast<long long>(p) * g.lda : p + static_cast<long long>(i) * g.lda;
                float v = load(g.a, g.atype, offA + at);
                a[static_cast<size_t>(i) * g.k + p] = g.tf32 ? tf32(v) : v;
            }
        }
        for (int j = 0; j < g.n; j++) {   // op(B) column j, contiguous over p
            for (int p = 0; p < g.k; p++) {
                long long at = g.transb == 0 ? p + static_cast<long long>(j) * g.ldb : j + static_cast<long long>(p) * g.ldb;
                float v = load(g.b, g.btype, offB + at);
                b[static_cast<size_t>(j) * g.k + p] = g.tf32 ? tf32(v) : v;
            }
        }
        for (int j = 0; j < g.n; j++) {
            const float* bj = &b[static_cast<size_t>(j) * g.k];
            for (int i = 0; i < g.m; i++) {
                const float* ai = &a[static_cast<size_t>(i) * g.k];
                float acc = 0.f;
                for (int p = 0; p < g.k; p++) acc += ai[p] * bj[p];
                long long at = offC + i + static_cast<long long>(j) * g.ldc;
                float v = g.alpha * acc;
                if (g.beta != 0.f) v += g.beta * load(g.c, g.ctype, at);
                store(g.c, g.ctype, at, v);
            }
        }
    }
    return OK;
}

int gemm(const char* call, void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
         const void* a, int atype, int lda, long long strideA, const void* b, int btype, int ldb, long long strideB,
         const void* beta, void* c, int ctype, int ldc, long long strideC, int batch, int compute, int algo) {
    if (!is_handle(HANDLE, handle)) return NOT_INITIALIZED_;
    Handle* h = static_cast<Handle*>(handle);
    std::ostringstream d;
    d << call << "(" << (transa == 0 ? 'N' : 'T') << (transb == 0 ? 'N' : 'T') << ", m=" << m << ", n=" << n
      << ", k=" << k << ", lda=" << lda << ", ldb=" << ldb << ", ldc=" << ldc << ", " << type_name(atype) << " x "
      << type_name(btype) << " -> " << type_name(ctype) << ", compute " << compute << ", batch " << batch << ")";
    std::string label = d.str();
    if (in_host_function()) return fail(INTERNAL_ERROR, label, "cuBLAS called from a host function");
    int current;
    runtime_device(&current);
    if (current != h->device) {
        return fail(INVALID_VALUE_, label, "the handle belongs to cuda:" + std::to_string(h->device) +
                                               ", the current device is cuda:" + std::to_string(current));
    }
    if (transa < 0 || transa > 2 || transb < 0 || transb > 2) return fail(INVALID_VALUE_, label, "bad operation");
    if (m < 0 || n < 0 || k < 0 || batch < 0) return fail(INVALID_VALUE_, label, "a negative size");
    int aRows = transa == 0 ? m : k, bRows = transb == 0 ? k : n;
    if (lda < (aRows > 1 ? aRows : 1)) {
        return fail(INVALID_VALUE_, label, "lda = " + std::to_string(lda) + " is less than the " +
                                               std::to_string(aRows) + " rows of A as stored (op " +
                                               (transa == 0 ? "N" : "T") + ")");
    }
    if (ldb < (bRows > 1 ? bRows : 1)) {
        return fail(INVALID_VALUE_, label, "ldb = " + std::to_string(ldb) + " is less than the " +
                                               std::to_string(bRows) + " rows of B as stored (op " +
                                               (transb == 0 ? "N" : "T") + ")");
    }
    if (ldc < (m > 1 ? m : 1)) {
        return fail(INVALID_VALUE_, label, "ldc = " + std::to_string(ldc) + " is less than the " + std::to_string(m) +
                                               " rows of C");
    }
    if (alpha == nullptr || beta == nullptr) return fail(INVALID_VALUE_, label, "alpha or beta is NULL");
    if (!(algo == -1 || (algo >= 0 && algo <= 23) || (algo >= 99 && algo <= 115))) {
        return fail(INVALID_VALUE_, label, "unknown algorithm " + std::to_string(algo));
    }
    bool halfIn = atype == R_16F || atype == R_16BF;
    bool typesOk = atype == btype && (atype == R_32F || halfIn) && (ctype == R_32F || ctype == atype);
    bool computeOk = compute == COMPUTE_32F || compute == COMPUTE_32F_PEDANTIC ||
                     (compute == COMPUTE_32F_FAST_TF32 && atype == R_32F && ctype == R_32F);
    if (!typesOk || !computeOk) {
        return fail(NOT_SUPPORTED_, label, "no GEMM for this combination of types and compute type");
    }
    if (batch > 1 && strideC < static_cast<long long>(ldc) * n) {
        return fail(INVALID_VALUE_, label, "strideC = " + std::to_string(strideC) +
                                               " makes the batches of C overlap (stand-in check)");
    }
    if (m == 0 || n == 0 || batch == 0) return SUCCESS;
    Gemm g{transa, transb, m, n, k, *static_cast<const float*>(alpha), *static_cast<const float*>(beta),
           a, atype, lda, strideA, b, btype, ldb, strideB, c, ctype, ldc, strideC, batch,
           compute == COMPUTE_32F_FAST_TF32};
    std::shared_ptr<Stream> s;
    if (resolve_stream(h->stream, &s) != OK) return fail(EXECUTION_FAILED, label, "the handle's stream is gone");
    int device = h->device;
    uintptr_t ws = h->workspace;
    size_t wsBytes = h->workspaceBytes;
    int rc = enqueue(s, label, [g, device, label, ws, wsBytes] {
        if (ws != 0) {
            std::string why = check_device_range(device, ws, wsBytes, 256, "the workspace");
            if (!why.empty()) {
                report(label + ": " + why);
                return static_cast<int>(ILLEGAL_ADDRESS);
            }
        }
        return run(g, device, label);
    });
    return rc == OK ? SUCCESS : EXECUTION_FAILED;
}

}  // namespace

extern "C" {

int cublasCreate_v2(void** handle) {
    if (handle == nullptr) return INVALID_VALUE_;
    if (in_host_function()) return NOT_INITIALIZED_;
    auto* h = new Handle;
    runtime_device(&h->device);
    register_handle(HANDLE, h);
    *handle = h;
    return SUCCESS;
}

int cublasDestroy_v2(void* handle) {
    if (!is_handle(HANDLE, handle)) return NOT_INITIALIZED_;
    Handle* h = static_cast<Handle*>(handle);
    std::shared_ptr<Stream> s;
    if (resolve_stream(h->stream, &s) == OK) synchronize_stream(s);
    unregister_handle(HANDLE, h);
    delete h;
    return SUCCESS;
}

int cublasSetStream_v2(void* handle, void* stream) {
    if (!is_handle(HANDLE, handle)) return NOT_INITIALIZED_;
    Handle* h = static_cast<Handle*>(handle);
    std::shared_ptr<Stream> s;
    if (resolve_stream(stream, &s) != OK) return fail(INVALID_VALUE_, "cublasSetStream", "not a live stream");
    if (s->device != h->device) {
        return fail(INVALID_VALUE_, "cublasSetStream", "the stream belongs to cuda:" + std::to_string(s->device) +
                                                           ", the handle to cuda:" + std::to_string(h->device));
    }
    h->stream = stream;
    h->workspace = 0;   // as cuBLAS 12+: a new stream resets the workspace to the library's pool
    h->workspaceBytes = 0;
    return SUCCESS;
}

int cublasGetStream_v2(void* handle, void** stream) {
    if (!is_handle(HANDLE, handle)) return NOT_INITIALIZED_;
    if (stream == nullptr) return INVALID_VALUE_;
    *stream = static_cast<Handle*>(handle)->stream;
    return SUCCESS;
}

int cublasSetWorkspace_v2(void* handle, void* workspace, size_t bytes) {
    if (!is_handle(HANDLE, handle)) return NOT_INITIALIZED_;
    Handle* h = static_cast<Handle*>(handle);
    uintptr_t p = reinterpret_cast<uintptr_t>(workspace);
    if (bytes > 0) {
        std::string why = check_device_range(h->device, p, bytes, 256, "the workspace");
        if (!why.empty()) return fail(INVALID_VALUE_, "cublasSetWorkspace", why);
    }
    h->workspace = bytes > 0 ? p : 0;
    h->workspaceBytes = bytes;
    return SUCCESS;
}

int cublasSetMathMode(void* handle, int mode) {
    if (!is_handle(HANDLE, handle)) return NOT_INITIALIZED_;
    return mode >= 0 && mode <= 0x1f ? SUCCESS : INVALID_VALUE_;
}

int cublasGemmEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                 int atype, int lda, const void* b, int btype, int ldb, const void* beta, void* c, int ctype, int ldc,
                 int compute, int algo) {
    return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, a, atype, lda, 0, b, btype, ldb, 0, beta, c,
                ctype, ldc, 0, 1, compute, algo);
}

int cublasGemmStridedBatchedEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha,
                               const void* a, int atype, int lda, long long strideA, const void* b, int btype,
                               int ldb, long long strideB, const void* beta, void* c, int ctype, int ldc,
                               long long strideC, int batch, int compute, int algo) {
    return gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, a, atype, lda, strideA, b,
                btype, ldb, strideB, beta, c, ctype, ldc, strideC, batch, compute, algo);
}

const char* cublasGetStatusName(int status) {
    switch (status) {
        case SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case NOT_INITIALIZED_: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case INVALID_VALUE_: return "CUBLAS_STATUS_INVALID_VALUE";
        case ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case NOT_SUPPORTED_: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
        default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char* cublasGetStatusString(int status) {
    switch (status) {
        case SUCCESS: return "success";
        case NOT_INITIALIZED_: return "the library was not initialized";
        case ALLOC_FAILED: return "the resource allocation failed";
        case INVALID_VALUE_: return "an invalid numeric value was used as an argument";
        case ARCH_MISMATCH: return "an absent device architectural feature is required";
        case MAPPING_ERROR: return "an access to GPU memory space failed";
        case EXECUTION_FAILED: return "the GPU program failed to execute";
        case INTERNAL_ERROR: return "an internal operation failed";
        case NOT_SUPPORTED_: return "the functionality requested is not supported";
        case LICENSE_ERROR: return "the functionality requested requires some license and an error was detected "
                                   "when trying to check the current licensing";
        default: return "unknown error";
    }
}

}  // extern "C"
