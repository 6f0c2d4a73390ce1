// Embedding lookup on the device, the CUDA version of backend::get_rows (cpu_backend.cpp):
//   y[t, :] = W[ids[t], :] dequantized      W: [n_rows, n_cols] quantized; y: [n, n_cols] float
// One thread per (token, 32-element group), dequantizing with the same load_group as the matmul
// kernels (dequant.cuh), so the values equal the CPU's dequantize_row up to fp32 rounding of d*q.
// The ids were range-checked on the host.
#include "cuda_common.cuh"
#include "dequant.cuh"

namespace specgen::cuda {

namespace {

template <ggml_type T>
__global__ void get_rows_kernel(const uint8_t* __restrict__ W, size_t row_bytes, int64_t n_cols,
                                const int32_t* __restrict__ ids, float* __restrict__ y) {
    const int t = blockIdx.y;
    const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t n_groups = (n_cols + 31) / 32;
    if (g >= n_groups) return;
    float w[32];
    load_group<T>(W + int64_t(ids[t]) * row_bytes, g, n_cols, w);
    float* yr = y + int64_t(t) * n_cols + g * 32;
    const int64_t rest = n_cols - g * 32;
    const int nc = rest < 32 ? int(rest) : 32;
#pragma unroll
    for (int j = 0; j < 32; ++j)
        if (j < nc) yr[j] = w[j];
}

template <ggml_type T>
void launch(const void* W, size_t row_bytes, int64_t n_cols, const int32_t* ids, int n, float* y, cudaStream_t stream) {
    constexpr int kThreads = 128;
    const int64_t n_groups = (n_cols + 31) / 32;
    for (int t0 = 0; t0 < n; t0 += 65535) {  // gridDim.y limit
        const dim3 grid(unsigned((n_groups + kThreads - 1) / kThreads), unsigned(min(65535, n - t0)));
        get_rows_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(W), row_bytes, n_cols, ids + t0,
                                                          y + int64_t(t0) * n_cols);
        SPECGEN_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace

void get_rows(ggml_type type, const void* W, size_t row_bytes, int64_t n_cols, const int32_t* ids, int n, float* y,
              cudaStream_t stream) {
    if (n <= 0) return;
    switch (type) {
        case ggml_type::F32: return launch<ggml_type::F32>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::F16: return launch<ggml_type::F16>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::BF16: return launch<ggml_type::BF16>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::Q8_0: return launch<ggml_type::Q8_0>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::Q5_0: return launch<ggml_type::Q5_0>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::Q4_K: return launch<ggml_type::Q4_K>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::Q5_K: return launch<ggml_type::Q5_K>(W, row_bytes, n_cols, ids, n, y, stream);
        case ggml_type::Q6_K: return launch<ggml_type::Q6_K>(W, row_bytes, n_cols, ids, n, y, stream);
        default:
            throw not_implemented_error(std::string("the CUDA backend has no get_rows kernel for weight type ") +
                                        ggml_type_name(type));
    }
}

}  // namespace specgen::cuda
