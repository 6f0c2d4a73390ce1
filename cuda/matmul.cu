// Quantized matrix-vector and small-batch matrix-matrix products on the device, the CUDA version of
// backend::matmul and backend::matmul_selected (cpu_backend.cpp):
//   y[t, k] = W[r_k, :] . x[t, :],  r_k = rows ? rows[k] : k,  k < n_out, t < n_tokens
//   W: quantized rows (row_bytes each); x: [n_tokens, n_cols] float; y: [n_tokens, n_out] float
//
// One warp per output row k. Lane l owns the 32-element groups g = l, l+32, l+64, ... of the row:
// it dequantizes a group once (dequant.cuh) and multiplies it with up to kTokTile token rows,
// accumulating in fp32 with fmaf in a fixed order (groups ascending, elements ascending); the 32
// lane sums are then combined by a butterfly (warp_sum). That sequence is the same for every token
// whatever n_tokens is, so the result is batch-invariant; decode (n = 1) and verification
// (n = gamma + 1) run the same code. Batches above kTokTile tokens walk the row again per tile
// (the re-reads hit L2).
//
// Unlike the CPU, which quantizes x to Q8_0/Q8_K and uses integer dots, x stays fp32 here: results
// agree with the CPU to quantization noise of the activations, not bit for bit (tolerances in
// tests/test_cuda.py). Reference: dot_<type>_ref of cpp/src/quant/<type>.cpp up to that difference.
#include "cuda_common.cuh"
#include "dequant.cuh"

namespace specgen::cuda {

namespace {

constexpr int kWarps = 4;     // output rows per block
constexpr int kTokTile = 8;   // token rows per pass over a weight row

template <ggml_type T>
__global__ void __launch_bounds__(32 * kWarps)
matmul_kernel(const uint8_t* __restrict__ W, size_t row_bytes, int64_t n_cols, const int32_t* __restrict__ rows,
              int64_t n_out, const float* __restrict__ x, int n_tokens, float* __restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t k = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (k >= n_out) return;  // a whole warp leaves together
    const int64_t r = rows ? int64_t(rows[k]) : k;
    const uint8_t* wr = W + r * row_bytes;
    const int64_t n_groups = (n_cols + 31) / 32;
    // Quantized rows hold whole groups and x rows are then 128-byte multiples: float4 loads.
    const bool whole = n_cols % 32 == 0;

    for (int t0 = 0; t0 < n_tokens; t0 += kTokTile) {
        const int nt = min(kTokTile, n_tokens - t0);
        float acc[kTokTile];
#pragma unroll
        for (int t = 0; t < kTokTile; ++t) acc[t] = 0.0f;
        for (int64_t g = lane; g < n_groups; g += 32) {
            float w[32];
            load_group<T>(wr, g, n_cols, w);
            const int64_t c0 = g * 32;
#pragma unroll
            for (int t = 0; t < kTokTile; ++t) {
                if (t >= nt) break;
                const float* xt = x + int64_t(t0 + t) * n_cols + c0;
                float a = acc[t];
                if (whole) {
                    const float4* x4 = reinterpret_cast<const float4*>(xt);
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        const float4 v = x4[j];
                        a = fmaf(w[4 * j + 0], v.x, a);
                        a = fmaf(w[4 * j + 1], v.y, a);
                        a = fmaf(w[4 * j + 2], v.z, a);
                        a = fmaf(w[4 * j + 3], v.w, a);
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < 32; ++j) a = fmaf(w[j], c0 + j < n_cols ? xt[j] : 0.0f, a);
                }
                acc[t] = a;
            }
        }
#pragma unroll
        for (int t = 0; t < kTokTile; ++t) {
            if (t >= nt) break;
            const float v = warp_sum(acc[t]);
            if (lane == 0) y[int64_t(t0 + t) * n_out + k] = v;
        }
    }
}

template <ggml_type T>
void launch(const void* W, size_t row_bytes, int64_t n_cols, const int32_t* rows, int64_t n_out, const float* x,
            int n_tokens, float* y, cudaStream_t stream) {
    const int64_t blocks = (n_out + kWarps - 1) / kWarps;
    matmul_kernel<T><<<unsigned(blocks), 32 * kWarps, 0, stream>>>(static_cast<const uint8_t*>(W), row_bytes, n_cols,
                                                                   rows, n_out, x, n_tokens, y);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool weight_type_supported(ggml_type type) {
    switch (type) {
        case ggml_type::F32: case ggml_type::F16: case ggml_type::BF16: case ggml_type::Q8_0:
        case ggml_type::Q5_0: case ggml_type::Q4_K: case ggml_type::Q5_K: case ggml_type::Q6_K: return true;
        default: return false;
    }
}

void matmul(ggml_type type, const void* W, size_t row_bytes, int64_t n_cols, const int32_t* rows, int64_t n_out,
            const float* x, int n_tokens, float* y, cudaStream_t stream) {
    if (n_out <= 0 || n_tokens <= 0) return;
    switch (type) {
        case ggml_type::F32: return launch<ggml_type::F32>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::F16: return launch<ggml_type::F16>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::BF16: return launch<ggml_type::BF16>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::Q8_0: return launch<ggml_type::Q8_0>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::Q5_0: return launch<ggml_type::Q5_0>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::Q4_K: return launch<ggml_type::Q4_K>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::Q5_K: return launch<ggml_type::Q5_K>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        case ggml_type::Q6_K: return launch<ggml_type::Q6_K>(W, row_bytes, n_cols, rows, n_out, x, n_tokens, y, stream);
        default:
            throw not_implemented_error(std::string("the CUDA backend has no matmul kernel for weight type ") +
                                        ggml_type_name(type));
    }
}

}  // namespace specgen::cuda
