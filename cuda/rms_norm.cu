// RMSNorm on the device, the CUDA version of backend::rms_norm (cpu_backend.cpp):
//   y[r, :] = x[r, :] * (1 / sqrt(mean(x[r, :]^2) + eps)) * w      (w may be null; in place allowed)
// One block per row. The sum of squares is accumulated in double like the CPU's (per-thread strided
// partial sums, then a fixed shared-memory tree), so the scale matches the CPU's to double rounding;
// the order depends only on the row length, never on n_rows (batch invariance).
#include "cuda_common.cuh"

namespace specgen::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
rms_norm_kernel(const float* x, const float* __restrict__ w, int n, float eps, float* y) {
    __shared__ double partial[kThreads];
    const float* xr = x + int64_t(blockIdx.x) * n;
    float* yr = y + int64_t(blockIdx.x) * n;
    double ss = 0.0;
    for (int i = threadIdx.x; i < n; i += kThreads) ss += double(xr[i]) * double(xr[i]);
    partial[threadIdx.x] = ss;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    const float scale = float(1.0 / sqrt(partial[0] / n + double(eps)));
    // Every x[i] of the row was read before the barriers above: writing y in place is safe.
    for (int i = threadIdx.x; i < n; i += kThreads) yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
}

}  // namespace

void rms_norm(const float* x, const float* w, int n_rows, int n, float eps, float* y, cudaStream_t stream) {
    if (n_rows <= 0) return;
    rms_norm_kernel<<<unsigned(n_rows), kThreads, 0, stream>>>(x, w, n, eps, y);
    SPECGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace specgen::cuda
