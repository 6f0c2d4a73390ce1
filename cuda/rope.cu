// Rotary position embedding on the device, the CUDA version of backend::rope (cpu_backend.cpp):
// each head of x[t] (x: [n_tokens, n_heads, head_dim]) is rotated by position pos[t]; pair i
// (i < head_dim/2) is (2i, 2i+1) for rope_style::normal and (i, i + head_dim/2) for neox, with
//   inv_freq_i from the host (model/rope_scaling.h: base frequencies with the file's scaling)
//   angle = float(pos) * inv_freq_i,  cos/sin in double rounded to float, times mscale (float),
// exactly as the CPU computes it.
// One thread per (token, head, pair); every pair is independent, so results are batch-invariant.
#include "cuda_common.cuh"

namespace specgen::cuda {

namespace {

__global__ void rope_kernel(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* __restrict__ pos,
                            const float* __restrict__ inv_freq, float mscale, bool neox) {
    const int half = head_dim / 2;
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= int64_t(n_tokens) * n_heads * half) return;
    const int i = int(idx % half);
    const int64_t th = idx / half;  // t * n_heads + h
    const int t = int(th / n_heads);
    const float angle = float(pos[t]) * inv_freq[i];
    const float c = float(cos(double(angle))) * mscale, s = float(sin(double(angle))) * mscale;
    float* v = x + th * head_dim;
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
}

}  // namespace

void rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos, const float* inv_freq, float mscale,
          rope_style style, cudaStream_t stream) {
    const int64_t n = int64_t(n_tokens) * n_heads * (head_dim / 2);
    if (n <= 0) return;
    constexpr int kThreads = 256;
    rope_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        x, n_tokens, n_heads, head_dim, pos, inv_freq, mscale, style == rope_style::neox);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace specgen::cuda
