// Causal attention on the device, the CUDA version of backend::attention (cpu_backend.cpp), for
// decode (n_tokens = 1) and verification/prefill batches alike:
//   query t at position pos[t], head h, reads KV head hk = h / (n_head / n_head_kv) (GQA) over cache
//   rows j in [first, last]: last = min(pos[t], n_kv - 1), first = max(0, pos[t] - window + 1) with a
//   sliding window, else 0.  s_j = (q . k_j) * scale (then softcap * tanh(s_j / softcap) if set);
//   out = sum_j softmax(s)_j v_j.
//   q, out: [n_tokens, n_head, head_dim]; k_cache, v_cache: [n_ctx, n_head_kv, head_dim]
//
// One block of 4 warps per (head, token). Keys are taken in chunks of 128: each warp computes the
// scores of every 4th key of the chunk (lanes split head_dim, warp_sum), then an online softmax
// (running max, rescaled sum and output; thread d owns output dims d, d+128, ...) folds the chunk in.
// The order of every operation depends only on (pos[t], window, head_dim), never on n_tokens:
// batch-invariant. It differs from the CPU's two-pass softmax by float rounding only.
#include <algorithm>

#include "cuda_common.cuh"

namespace specgen::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunk = 128;
constexpr int kDimsPerThread = kMaxHeadDim / kThreads;

__global__ void __launch_bounds__(kThreads)
attention_kernel(const float* __restrict__ q, const float* __restrict__ K, const float* __restrict__ V,
                 const int32_t* __restrict__ pos, int n_kv, int n_head, int n_head_kv, int D, float scale, int window,
                 float softcap, float* __restrict__ out) {
    __shared__ float qs[kMaxHeadDim];
    __shared__ float sc[kChunk];
    const int h = blockIdx.x, t = blockIdx.y;
    const int hk = h / (n_head / n_head_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float* qv = q + (int64_t(t) * n_head + h) * D;
    for (int d = tid; d < D; d += kThreads) qs[d] = qv[d];
    const int64_t kv_stride = int64_t(n_head_kv) * D;
    const int p = pos[t];
    const int last = min(p, n_kv - 1);
    const int first = window > 0 ? max(0, p - window + 1) : 0;

    float acc[kDimsPerThread];
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();

    for (int j0 = first; j0 <= last; j0 += kChunk) {
        const int nj = min(kChunk, last - j0 + 1);
        for (int jj = warp; jj < nj; jj += kWarps) {
            const float* kr = K + int64_t(j0 + jj) * kv_stride + int64_t(hk) * D;
            float s = 0.0f;
            for (int d = lane; d < D; d += 32) s = fmaf(qs[d], kr[d], s);
            s = warp_sum(s) * scale;
            if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
            if (lane == 0) sc[jj] = s;
        }
        __syncthreads();
        float m_chunk = -INFINITY;
        for (int jj = 0; jj < nj; ++jj) m_chunk = fmaxf(m_chunk, sc[jj]);
        const float m_new = fmaxf(m, m_chunk);
        const float corr = expf(m - m_new);  // 0 on the first chunk (m = -inf)
        __syncthreads();  // every thread has read the scores before they become probabilities
        for (int jj = tid; jj < nj; jj += kThreads) sc[jj] = expf(sc[jj] - m_new);
        __syncthreads();
        l *= corr;
#pragma unroll
        for (int i = 0; i < kDimsPerThread; ++i) acc[i] *= corr;
        for (int jj = 0; jj < nj; ++jj) {
            const float pj = sc[jj];
            l += pj;
            const float* vr = V + int64_t(j0 + jj) * kv_stride + int64_t(hk) * D;
#pragma unroll
            for (int i = 0; i < kDimsPerThread; ++i) {
                const int d = tid + i * kThreads;
                if (d < D) acc[i] = fmaf(pj, vr[d], acc[i]);
            }
        }
        m = m_new;
        __syncthreads();  // the next chunk overwrites sc
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float* o = out + (int64_t(t) * n_head + h) * D;
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
        const int d = tid + i * kThreads;
        if (d < D) o[d] = acc[i] * inv;
    }
}

}  // namespace

void attention(const float* q, const float* k_cache, const float* v_cache, int n_tokens, const int32_t* pos, int n_kv,
               const attention_params& p, float* out, cudaStream_t stream) {
    if (n_tokens <= 0) return;
    if (p.head_dim > kMaxHeadDim || p.head_dim <= 0)
        throw not_implemented_error("the CUDA attention kernel supports head_dim up to " + std::to_string(kMaxHeadDim) +
                                    ", got " + std::to_string(p.head_dim));
    if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
        throw invalid_argument_error("n_head (" + std::to_string(p.n_head) + ") must be a multiple of n_head_kv (" +
                                     std::to_string(p.n_head_kv) + ")");
    for (int t0 = 0; t0 < n_tokens; t0 += 65535) {  // gridDim.y limit
        const int nt = std::min(65535, n_tokens - t0);
        attention_kernel<<<dim3(unsigned(p.n_head), unsigned(nt)), kThreads, 0, stream>>>(
            q + int64_t(t0) * p.n_head * p.head_dim, k_cache, v_cache, pos + t0, n_kv, p.n_head, p.n_head_kv, p.head_dim,
            p.scale, p.sliding_window, p.softcap, out + int64_t(t0) * p.n_head * p.head_dim);
        SPECGEN_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace specgen::cuda
