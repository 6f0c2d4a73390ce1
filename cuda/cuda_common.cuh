// Shared by the CUDA backend's files: error checking (every failed CUDA call becomes a
// specgen::device_error naming the call), warp reductions, fp16/bf16 decoding, and the launchers of
// the kernels, one per CPU op they mirror (cpu_backend.cpp is the reference semantics).
//
// Every launcher enqueues on `stream` and returns at once. All pointers are device memory.
// Batch invariance: every kernel computes an output row with a fixed sequence of operations that
// does not depend on how many rows (tokens) the launch covers.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "common/error.h"
#include "quant/ggml_type.h"

namespace specgen::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

#define SPECGEN_CUDA_CHECK(call)                                                          \
    do {                                                                                  \
        const cudaError_t specgen_err_ = (call);                                          \
        if (specgen_err_ != cudaSuccess)                                                  \
            ::specgen::cuda::throw_cuda_error(specgen_err_, #call, __FILE__, __LINE__);   \
    } while (0)
// After a kernel launch: configuration errors are reported here, execution errors at the next sync.
#define SPECGEN_CUDA_CHECK_LAUNCH() SPECGEN_CUDA_CHECK(cudaGetLastError())

// Sum over the 32 lanes of a warp (butterfly: lane 0's result has a fixed order of additions).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float fp16_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// Weight types the matmul/get_rows kernels read (F32 F16 BF16 Q8_0 Q5_0 Q4_K Q5_K Q6_K).
bool weight_type_supported(ggml_type type);

// y[t, k] = W[rows ? rows[k] : k, :] . x[t, :] for k < n_out, t < n_tokens   (matmul.cu)
//   W: rows of row_bytes bytes in `type`, n_cols elements; x: [n_tokens, n_cols]; y: [n_tokens, n_out]
void matmul(ggml_type type, const void* W, size_t row_bytes, int64_t n_cols, const int32_t* rows, int64_t n_out,
            const float* x, int n_tokens, float* y, cudaStream_t stream);
// y[t, :] = W[ids[t], :] dequantized   (get_rows.cu; ids already range-checked on the host)
void get_rows(ggml_type type, const void* W, size_t row_bytes, int64_t n_cols, const int32_t* ids, int n, float* y,
              cudaStream_t stream);
// rms_norm.cu, rope.cu, attention.cu, elementwise.cu: the backend ops of the same names.
void rms_norm(const float* x, const float* w, int n_rows, int n, float eps, float* y, cudaStream_t stream);
void rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos, const float* inv_freq, float mscale,
          rope_style style, cudaStream_t stream);
constexpr int kMaxHeadDim = 512;
void attention(const float* q, const float* k_cache, const float* v_cache, int n_tokens, const int32_t* pos, int n_kv,
               const attention_params& p, float* out, cudaStream_t stream);
void gelu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
void add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream);
void scale(const float* x, float s, int64_t n, float* out, cudaStream_t stream);

// Whether this build's kernels can run on the current device (false: no SASS/PTX for its arch).
bool kernels_runnable(cudaError_t* why);

}  // namespace specgen::cuda
