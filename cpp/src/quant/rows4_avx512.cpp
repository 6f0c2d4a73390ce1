// AVX-512 VNNI kernel of the rows4 layout (rows4.h): Q8_0 / Q5_0 / Q4_0 weights x Q8_0 activations,
// four weight rows per zmm (row k in 128-bit lane k).
//
// Per block and token: p = vpdpbusd(vpdpbusd(corr, w_lo, x_lo), w_hi, x_hi) holds, in lane l of row
// k, the exact integer sum of rows4.h (corr = -offset * the same lanes of x, prepared once per token
// and block: vpdpbusd needs unsigned weights, which are stored + offset); then
// acc = fma(float(p), d_w * d_x, acc): 5 vector operations per 4 rows x 32 elements, against 8 for
// the pair-per-row kernels of dot_avx512.cpp. Each lane's arithmetic is the same whichever groups
// and tokens share the tile, and one token takes the same path (batch invariance).
// Checked bit-exact against matmul_rows4_ref by tests/test_quant.py; compiled with -mavx512f/bw/vl/dq/vnni.
#include <immintrin.h>

#include <cstring>
#include <vector>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "quant/kernels.h"

namespace specgen {
namespace quant {
namespace {

#include "quant/gemm_tiles.h"

// The per-token part of a block, computed once per call: the activations' two 16-byte halves, the
// offset correction and the scale.
struct alignas(64) x_block {
    __m512i corr;
    __m128i lo, hi;
    float d;
};

template <int OFFSET>
void prepare_x(int64_t n, const uint8_t* X, size_t xs, int n_tok, x_block* P) {
    const int64_t nb = n / QK;
    const __m512i off = _mm512_set1_epi8(static_cast<char>(OFFSET)), zero = _mm512_setzero_si512();
    for (int t = 0; t < n_tok; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(X + t * xs)[b];
            x_block& p = P[t * nb + b];
            p.lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs));
            p.hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs + 16));
            __m512i s = _mm512_dpbusd_epi32(zero, off, _mm512_broadcast_i32x4(p.lo));
            s = _mm512_dpbusd_epi32(s, off, _mm512_broadcast_i32x4(p.hi));
            p.corr = _mm512_sub_epi32(zero, s);
            p.d = _cvtsh_ss(xb.d);
        }
}

// The 4 rows' scales of a record (d[4] at its start), row k's in lane k.
inline __m512 scales4(const uint8_t* rec) {
    const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec)));
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(d));
}

// Unsigned weights of a record: elements 0-15 (lo) and 16-31 (hi) of row k in lane k.
template <class B>
struct record;

template <>
struct record<block_q8_0> {
    static constexpr int offset = 128;
    static void load(const uint8_t* rec, __m512i& lo, __m512i& hi) {
        lo = _mm512_loadu_si512(rec + 8);
        hi = _mm512_loadu_si512(rec + 72);
    }
};

template <>
struct record<block_q4_0> {
    static constexpr int offset = 8;
    static void load(const uint8_t* rec, __m512i& lo, __m512i& hi) {
        const __m512i q = _mm512_loadu_si512(rec + 8), m = _mm512_set1_epi8(0x0f);
        lo = _mm512_and_si512(q, m);
        hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);
    }
};

template <>
struct record<block_q5_0> {
    static constexpr int offset = 16;
    static void load(const uint8_t* rec, __m512i& lo, __m512i& hi) {
        const __m512i q = _mm512_loadu_si512(rec + 24), m = _mm512_set1_epi8(0x0f), sixteen = _mm512_set1_epi8(16);
        uint64_t mlo, mhi;
        std::memcpy(&mlo, rec + 8, 8);
        std::memcpy(&mhi, rec + 16, 8);
        lo = _mm512_and_si512(q, m);
        hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);
        lo = _mm512_mask_add_epi8(lo, __mmask64(mlo), lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, __mmask64(mhi), hi, sixteen);
    }
};

// (a0 + a1) + (a2 + a3) of one row's lane.
inline float lane_sum(__m128 v) {
    const __m128 h = _mm_hadd_ps(v, v);
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// NG groups (4 * NG rows; the last group's rows past n_valid are dropped) x NT prepared tokens.
// W: the first group; groups are gs bytes apart, records rb bytes apart inside a group.
template <class B, int NG, int NT>
void run_tile(int64_t n, const uint8_t* W, size_t gs, int n_valid, const x_block* P, int64_t np, float* Y,
              int64_t ys) {
    constexpr size_t rb = 4 * sizeof(B);
    const int64_t nb = n / QK;
    __m512 acc[NG][NT];
    for (int g = 0; g < NG; ++g)
        for (int t = 0; t < NT; ++t) acc[g][t] = _mm512_setzero_ps();
    stream_prefetcher pf(W, NG * gs, nb);
    for (int64_t b = 0; b < nb; ++b) {
        pf.step();
        __m512i lo[NG], hi[NG];
        __m512 dw[NG];
        for (int g = 0; g < NG; ++g) {
            const uint8_t* rec = W + g * gs + b * rb;
            record<B>::load(rec, lo[g], hi[g]);
            dw[g] = scales4(rec);
        }
        for (int t = 0; t < NT; ++t) {
            const x_block& x = P[t * np + b];
            const __m512i xlo = _mm512_broadcast_i32x4(x.lo), xhi = _mm512_broadcast_i32x4(x.hi);
            const __m512 dx = _mm512_set1_ps(x.d);
            for (int g = 0; g < NG; ++g) {
                const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(x.corr, lo[g], xlo), hi[g], xhi);
                acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[g], dx), acc[g][t]);
            }
        }
    }
    for (int g = 0; g < NG; ++g) {
        const int nv = g + 1 < NG ? 4 : n_valid;
        for (int t = 0; t < NT; ++t) {
            alignas(64) float lanes[16];
            _mm512_store_ps(lanes, acc[g][t]);
            for (int k = 0; k < nv; ++k) Y[t * ys + 4 * g + k] = lane_sum(_mm_load_ps(lanes + 4 * k));
        }
    }
}

// Rows in tiles of 8 (two groups), the last 1-7 rows in one or two groups; tokens NT at a time.
template <class B, int NT>
void rows_loop(int64_t n, const uint8_t* W, size_t ws, int n_rows, const x_block* P, int64_t np, float* Y,
               int64_t ys) {
    const size_t gs = 4 * ws;
    int r = 0;
    for (; r + 8 <= n_rows; r += 8) run_tile<B, 2, NT>(n, W + r * ws, gs, 4, P, np, Y + r, ys);
    const int left = n_rows - r;
    if (left > 4) run_tile<B, 2, NT>(n, W + r * ws, gs, left - 4, P, np, Y + r, ys);
    else if (left > 0) run_tile<B, 1, NT>(n, W + r * ws, gs, left, P, np, Y + r, ys);
}

constexpr int kTileTokens = 6;

// gemm_fn over a packed matrix: W is the group of row 0, ws the size of one original row.
template <class B>
void gemm_rows4(int64_t n, const void* Wv, size_t ws, int n_rows, const void* Xv, size_t xs, int n_tok, float* Y,
                int64_t ys) {
    const uint8_t* W = static_cast<const uint8_t*>(Wv);
    const uint8_t* X = static_cast<const uint8_t*>(Xv);
    const int64_t np = n / QK;
    constexpr int kRowBlock = 32;                 // rows that stay in cache while every token tile passes
    constexpr int kTokenChunk = 7 * kTileTokens;  // prepared tokens per pass over the rows (in L2)
    thread_local std::vector<x_block> prepared;
    for (int t0 = 0; t0 < n_tok; t0 += kTokenChunk) {
        const int nt = n_tok - t0 < kTokenChunk ? n_tok - t0 : kTokenChunk;
        if (prepared.size() < size_t(nt) * np) prepared.resize(size_t(nt) * np);
        prepare_x<record<B>::offset>(n, X + t0 * xs, xs, nt, prepared.data());
        const x_block* P = prepared.data();
        for (int r0 = 0; r0 < n_rows; r0 += kRowBlock) {
            const int nr = n_rows - r0 < kRowBlock ? n_rows - r0 : kRowBlock;
            const uint8_t* Wb = W + r0 * ws;
            float* Yb = Y + int64_t(t0) * ys + r0;
            int t = 0;
            for (; t + kTileTokens <= nt; t += kTileTokens)
                rows_loop<B, kTileTokens>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys);
            switch (nt - t) {
                case 5: rows_loop<B, 5>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 4: rows_loop<B, 4>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 3: rows_loop<B, 3>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 2: rows_loop<B, 2>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                case 1: rows_loop<B, 1>(n, Wb, ws, nr, P + t * np, np, Yb + t * ys, ys); break;
                default: break;
            }
        }
    }
}

}  // namespace

gemm_fn gemm_kernel_rows4_avx512(ggml_type w_type) {
    switch (w_type) {
        case ggml_type::Q8_0: return gemm_rows4<block_q8_0>;
        case ggml_type::Q4_0: return gemm_rows4<block_q4_0>;
        case ggml_type::Q5_0: return gemm_rows4<block_q5_0>;
        default: return nullptr;
    }
}

}  // namespace quant
}  // namespace specgen
