// Elementwise ops on the device, the CUDA versions of backend::gelu_mul, silu_mul, add and scale
// (cpu_backend.cpp), with the same float formulas (tanhf/expf, no fast math):
//   gelu_mul: out = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * up
//   silu_mul: out = g / (1 + exp(-g)) * up
//   add:      out = a + b           scale: out = x * s           (in place allowed for all)
#include <algorithm>

#include "cuda_common.cuh"

namespace specgen::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
    // Grid-stride loops: a bounded grid covers any n.
    return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
}

__global__ void gelu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
    }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* out) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void scale_kernel(const float* x, float s, int64_t n, float* out) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = x[i] * s;
}

}  // namespace

void gelu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    gelu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, n, out);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, n, out);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

void add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n, out);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

void scale(const float* x, float s, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, n, out);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace specgen::cuda
