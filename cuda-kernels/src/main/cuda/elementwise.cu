// Elementwise arithmetic: fill, add, bias add and its backward (column sums).
#include "common.cuh"

// out (n) = value; I32 takes the integer part.
extern "C" __global__ void fill_kernel(void* out, int dt, long long n, float value) {
    if (dt == DT_I32) {
        int iv = (int)value;
        GRID_STRIDE(i, n) static_cast<int*>(out)[i] = iv;
    } else {
        GRID_STRIDE(i, n) st(out, dt, i, value);
    }
}

// out (n) = a (n) + b (n); out may alias a or b (each element is read before it is written).
extern "C" __global__ void add_kernel(const void* a, int aDt, const void* b, int bDt,
                                      void* out, int outDt, long long n) {
    GRID_STRIDE(i, n) st(out, outDt, i, ld(a, aDt, i) + ld(b, bDt, i));
}

// out (rows, cols) += bias (cols). Row by row (FOR_ROWS): no 64-bit modulo per element.
extern "C" __global__ void add_bias_kernel(void* out, int outDt, const void* bias, int biasDt,
                                           long long rows, int cols) {
    FOR_ROWS(r, rows) {
        FOR_ROW_COLS(c, cols) {
            long long i = r * cols + c;
            st(out, outDt, i, ld(out, outDt, i) + ld(bias, biasDt, c));
        }
    }
}

// out (rows, cols) = bias (cols) in every row, in one pass (a half Linear's output before its GEMM
// adds, so the product rounds once with the bias in: Ops.setBias).
extern "C" __global__ void set_bias_kernel(void* out, int outDt, const void* bias, int biasDt,
                                           long long rows, int cols) {
    FOR_ROWS(r, rows) {
        FOR_ROW_COLS(c, cols) st(out, outDt, r * cols + c, ld(bias, biasDt, c));
    }
}

// dbias (cols) += Σ_r dout (rows, cols); block (COLSUM_TX, COLSUM_TY), grid (ceil(cols/COLSUM_TX),
// chunks) (column_sums; with several chunks the sums go to partials).
extern "C" __global__ void bias_backward_kernel(const void* dout, int doutDt, void* dbias, int dbiasDt,
                                                long long rows, int cols, float* partials, long long rowsPerChunk) {
    float sum[1];
    auto value = [&](long long r, int c, float (&acc)[1]) { acc[0] += ld(dout, doutDt, r * cols + c); };
    if (column_sums<1>(rows, rowsPerChunk, cols, value, sum)) {
        int c = blockIdx.x * COLSUM_TX + threadIdx.x;
        if (!column_partials_store<1>(partials, cols, c, sum)) st(dbias, dbiasDt, c, ld(dbias, dbiasDt, c) + sum[0]);
    }
}

// out_k (cols) += Σ_chunk partials (chunks, K, cols)[chunk][k], the chunks added in order, for k < K
// (K = 1 or 2; out1 unused when K = 1). Grid-stride over K·cols.
extern "C" __global__ void column_partials_kernel(const float* partials, int chunks, int K, int cols,
                                                  void* out0, int out0Dt, void* out1, int out1Dt) {
    GRID_STRIDE(i, (long long)K * cols) {
        int k = (int)(i / cols), c = (int)(i % cols);
        float s = 0.f;
        for (int j = 0; j < chunks; j++) s += partials[((long long)j * K + k) * cols + c];
        void* out = k == 0 ? out0 : out1;
        int dt = k == 0 ? out0Dt : out1Dt;
        st(out, dt, c, ld(out, dt, c) + s);
    }
}
