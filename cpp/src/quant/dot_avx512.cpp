// AVX-512 (F/BW/VL/DQ + VNNI) matrix kernels: Y[t, r] = dot(W row r, X row t) for
//   Q8_0, Q4_0, Q5_0 x Q8_0  (two 32-element blocks per zmm, vpdpbusd on offset-binary weights)
//   Q4_K, Q6_K x Q8_K         (vpmaddubsw + vpdpwssd with 16-bit sub-block scales)
//   F32, F16, BF16 x F32      (masked tails)
// Layouts in kernels.h. Checked against the scalar *_ref kernels by tests/test_quant.py (tight
// relative tolerance; integer parts are exact, only float summation order differs), and each kernel
// is the vec_dot of this ISA (tiles never change an output, see gemm_tiles.h).
// Token tiles are 4 rows x 4 tokens: the per-row (weight unpacking) and per-token (x scales and
// offsets) work is shared by 4 outputs each; 2 x 4 measured 97 vs 118 GMAC/s for Q8_0 (L2-resident).
// Compiled with -mavx512f/bw/vl/dq/vnni (CMakeLists.txt); only called when best_cpu_isa() allows.
#include <immintrin.h>

#include <vector>

// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "quant/kernels.h"

namespace specgen {
namespace quant {
namespace {

#include "quant/gemm_tiles.h"

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

// ---- Q8_0-family helpers: a pair of 32-element blocks per zmm -----------------------------------
// For the 4-bit types the byte order inside the zmm is [A0..15, B0..15, A16..31, B16..31] (the order
// nibble unpacking produces cheaply); x is loaded in the same order so products line up.

template <class B>
inline __m512 scale_pair(const B* b, bool two, __m512i idx) {
    const uint32_t bits = b[0].d | (two ? static_cast<uint32_t>(b[1].d) << 16 : 0u);
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}

inline __m512i load_q8_pair(const block_q8_0* b, bool two) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs));
    if (!two) return _mm512_zextsi256_si512(lo);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs)), 1);
}

// x pair in nibble order [A0..15, B0..15, A16..31, B16..31].
inline __m512i load_q8_pair_nibble_order(const block_q8_0* b, bool two) {
    return _mm512_shuffle_i64x2(load_q8_pair(b, two), load_q8_pair(b, two), _MM_SHUFFLE(3, 1, 2, 0));
}

// 4-bit weights of a pair of blocks (qs at byte offset qs_off) as bytes 0..15 in nibble order.
inline __m512i load_nibble_pair(const uint8_t* a, const uint8_t* b, bool two) {
    const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i qb = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)) : _mm_setzero_si128();
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(qa), qb, 1);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
}

// Lane l of a dpbusd result over nibble-ordered bytes belongs to block A for l in 0-3 and 8-11.
inline __m512i nibble_scale_idx() { return _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0); }
inline __m512i plain_scale_idx() { return _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0); }

// The per-token part of a Q8_0-family tile, computed once per call instead of once per row tile
// (gemm_tiled_prepared): the x pair, its offset correction and its scales. The values are those the
// plain kernels compute, so an output does not depend on which path made it.
struct alignas(64) x_pair {
    __m512i q, ncorr;
    __m512 d;
};

// x pairs of n_tok tokens, [t * n_pairs + pair]. NIBBLE: x in nibble order (4-bit weight types);
// OFFSET: what the weights are stored plus (128 for Q8_0's xor trick, 8 / 16 for Q4_0 / Q5_0).
template <bool NIBBLE, int OFFSET>
void prepare_x_pairs(int64_t n, const uint8_t* X, size_t xs, int n_tok, x_pair* P) {
    const int64_t nb = n / QK, np = (nb + 1) / 2;
    const __m512i off = _mm512_set1_epi8(static_cast<char>(OFFSET)), zero = _mm512_setzero_si512();
    const __m512i idx = NIBBLE ? nibble_scale_idx() : plain_scale_idx();
    for (int t = 0; t < n_tok; ++t)
        for (int64_t b = 0; b < nb; b += 2) {
            const bool two = b + 1 < nb;
            const block_q8_0* xb = reinterpret_cast<const block_q8_0*>(X + t * xs) + b;
            x_pair& xp = P[t * np + b / 2];
            xp.q = NIBBLE ? load_q8_pair_nibble_order(xb, two) : load_q8_pair(xb, two);
            xp.ncorr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, off, xp.q));
            xp.d = scale_pair(xb, two, idx);
        }
}

// NR x NT outputs over prepared x pairs; load_w(row block pointer, two) gives the unsigned weight
// pair and IDX its scale order. The same operations per output as the plain kernels below.
template <class B, int NR, int NT, class LoadW>
inline void run_x_pairs(int64_t n, const uint8_t* W, size_t ws, const x_pair* P, int64_t np, float* Y, int64_t ys,
                        __m512i idx, LoadW load_w) {
    const int64_t nb = n / QK;
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    stream_prefetcher pf(W, NR * ws, (nb + 1) / 2);
    for (int64_t b = 0; b < nb; b += 2) {
        pf.step();
        const bool two = b + 1 < nb;
        for (int r = 0; r < NR; ++r) {
            const B* wb = reinterpret_cast<const B*>(W + r * ws) + b;
            const __m512i wq = load_w(wb, two);
            const __m512 wd = scale_pair(wb, two, idx);
            for (int t = 0; t < NT; ++t) {
                const x_pair& xp = P[t * np + b / 2];
                const __m512i p = _mm512_dpbusd_epi32(xp.ncorr, wq, xp.q);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd, xp.d), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
}

struct k_q8_0 {
    static constexpr int nr_decode = 4, nr_batch = 4, nt_batch = 4;
    static constexpr int nt_prepared = 6;  // 24 accumulators: x comes from memory, not registers
    static int64_t prepared_per_token(int64_t n) { return (n / QK + 1) / 2; }
    static void prepare(int64_t n, const uint8_t* X, size_t xs, int n_tok, x_pair* P) {
        prepare_x_pairs<false, 128>(n, X, xs, n_tok, P);
    }
    template <int NR, int NT>
    static void run_prepared(int64_t n, const uint8_t* W, size_t ws, const x_pair* P, int64_t np, float* Y, int64_t ys) {
        const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
        run_x_pairs<block_q8_0, NR, NT>(n, W, ws, P, np, Y, ys, plain_scale_idx(), [&](const block_q8_0* wb, bool two) {
            return _mm512_xor_si512(load_q8_pair(wb, two), bias);
        });
    }
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK;
        const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
        const __m512i idx = plain_scale_idx();
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        stream_prefetcher pf(W, NR * ws, (nb + 1) / 2);
        for (int64_t b = 0; b < nb; b += 2) {
            pf.step();
            const bool two = b + 1 < nb;
            __m512i xq[NT], ncorr[NT];
            __m512 xd[NT];
            for (int t = 0; t < NT; ++t) {
                const block_q8_0* xb = reinterpret_cast<const block_q8_0*>(X + t * xs) + b;
                xq[t] = load_q8_pair(xb, two);
                // (w + 128)*x - 128*x: vpdpbusd needs an unsigned operand
                ncorr[t] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, xq[t]));
                xd[t] = scale_pair(xb, two, idx);
            }
            for (int r = 0; r < NR; ++r) {
                const block_q8_0* wb = reinterpret_cast<const block_q8_0*>(W + r * ws) + b;
                const __m512i wq = _mm512_xor_si512(load_q8_pair(wb, two), bias);
                const __m512 wd = scale_pair(wb, two, idx);
                for (int t = 0; t < NT; ++t) {
                    const __m512i p = _mm512_dpbusd_epi32(ncorr[t], wq, xq[t]);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd, xd[t]), acc[r][t]);
                }
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

// Q4_0 (offset 8) and Q5_0 (offset 16, fifth bit from qh): unsigned weights, offset * sum(x) removed.
template <class B, int OFFSET>
struct k_q4_5_0 {
    static constexpr int nr_decode = 4, nr_batch = 4, nt_batch = 4;
    static constexpr int nt_prepared = 6;
    static int64_t prepared_per_token(int64_t n) { return (n / QK + 1) / 2; }
    static void prepare(int64_t n, const uint8_t* X, size_t xs, int n_tok, x_pair* P) {
        prepare_x_pairs<true, OFFSET>(n, X, xs, n_tok, P);
    }
    template <int NR, int NT>
    static void run_prepared(int64_t n, const uint8_t* W, size_t ws, const x_pair* P, int64_t np, float* Y, int64_t ys) {
        run_x_pairs<B, NR, NT>(n, W, ws, P, np, Y, ys, nibble_scale_idx(), [](const B* wb, bool two) { return load_w(wb, two); });
    }
    static inline __m512i load_w(const B* b, bool two) {
        __m512i w = load_nibble_pair(b[0].qs, two ? b[1].qs : b[0].qs, two);
        if constexpr (OFFSET == 16) {
            uint32_t ha, hb = 0;
            std::memcpy(&ha, b[0].qh, 4);
            if (two) std::memcpy(&hb, b[1].qh, 4);
            const uint64_t m = (ha & 0xffffu) | (static_cast<uint64_t>(hb & 0xffffu) << 16) |
                               (static_cast<uint64_t>(ha >> 16) << 32) | (static_cast<uint64_t>(hb >> 16) << 48);
            w = _mm512_mask_add_epi8(w, static_cast<__mmask64>(m), w, _mm512_set1_epi8(16));
        }
        return w;
    }
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK;
        const __m512i off = _mm512_set1_epi8(OFFSET), zero = _mm512_setzero_si512();
        const __m512i idx = nibble_scale_idx();
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        stream_prefetcher pf(W, NR * ws, (nb + 1) / 2);
        for (int64_t b = 0; b < nb; b += 2) {
            pf.step();
            const bool two = b + 1 < nb;
            __m512i xq[NT], ncorr[NT];
            __m512 xd[NT];
            for (int t = 0; t < NT; ++t) {
                const block_q8_0* xb = reinterpret_cast<const block_q8_0*>(X + t * xs) + b;
                xq[t] = load_q8_pair_nibble_order(xb, two);
                ncorr[t] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, off, xq[t]));
                xd[t] = scale_pair(xb, two, idx);
            }
            for (int r = 0; r < NR; ++r) {
                const B* wb = reinterpret_cast<const B*>(W + r * ws) + b;
                const __m512i wq = load_w(wb, two);
                const __m512 wd = scale_pair(wb, two, idx);
                for (int t = 0; t < NT; ++t) {
                    const __m512i p = _mm512_dpbusd_epi32(ncorr[t], wq, xq[t]);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd, xd[t]), acc[r][t]);
                }
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

// ---- K-quants -----------------------------------------------------------------------------------

// 8 scales and 8 mins of a Q4_K/Q5_K block as two 64-bit words of bytes (see unpack_k_scales).
inline void unpack_k_scales_words(const uint8_t* s, uint64_t* sc, uint64_t* m) {
    uint32_t s0, s1, s2;
    std::memcpy(&s0, s, 4), std::memcpy(&s1, s + 4, 4), std::memcpy(&s2, s + 8, 4);
    const uint32_t sc_lo = s0 & 0x3f3f3f3fu, m_lo = s1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (s2 & 0x0f0f0f0fu) | (((s0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((s2 >> 4) & 0x0f0f0f0fu) | (((s1 >> 6) & 0x03030303u) << 4);
    *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
    *m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// int16 index vector [a x16, b x16] / [a x8, b x8, c x8, d x8] for vpermw.
inline __m512i idx16_2(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(a))),
                              _mm256_set1_epi16(static_cast<short>(b)), 1);
}
inline __m512i idx16_4(int a) {
    const __m256i lo = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(a + 1)), _mm_set1_epi16(static_cast<short>(a)));
    const __m256i hi = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(a + 3)), _mm_set1_epi16(static_cast<short>(a + 2)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

struct k_q4_k {
    static constexpr int nr_decode = 4, nr_batch = 4, nt_batch = 4;
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK_K;
        const __m512i lo4 = _mm512_set1_epi8(0x0f);
        const __m256i pair_idx = _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        stream_prefetcher pf(W, NR * ws, nb);
        for (int64_t i = 0; i < nb; ++i) {
            pf.step();
            const block_q8_k* xb[NT];
            __m256i bs[NT];
            for (int t = 0; t < NT; ++t) {
                xb[t] = reinterpret_cast<const block_q8_k*>(X + t * xs) + i;
                bs[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t]->bsums));
            }
            for (int r = 0; r < NR; ++r) {
                const block_q4_k* wb = reinterpret_cast<const block_q4_k*>(W + r * ws) + i;
                uint64_t scw, mw;
                unpack_k_scales_words(wb->scales, &scw, &mw);
                const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(scw))));
                const __m256i m16 = _mm256_permutexvar_epi16(
                    pair_idx, _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mw)))));
                __m512i isum[NT];
                for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
                for (int c = 0; c < 4; ++c) {
                    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qs + 32 * c));
                    const __m512i wq = _mm512_and_si512(
                        _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), lo4);
                    const __m512i s = _mm512_permutexvar_epi16(idx16_2(2 * c, 2 * c + 1), sc16);
                    for (int t = 0; t < NT; ++t) {
                        const __m512i xq = _mm512_loadu_si512(xb[t]->qs + 64 * c);
                        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(wq, xq), s);
                    }
                }
                const float d = _cvtsh_ss(wb->d), dmin = _cvtsh_ss(wb->dmin);
                for (int t = 0; t < NT; ++t) {
                    const __m256i mi = _mm256_madd_epi16(bs[t], m16);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * xb[t]->d), acc[r][t]);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(mi)),
                                                _mm512_set1_ps(-(dmin * xb[t]->d)), acc[r][t]);
                }
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

struct k_q6_k {
    static constexpr int nr_decode = 4, nr_batch = 4, nt_batch = 4;
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK_K;
        const __m512i lo4 = _mm512_set1_epi8(0x0f), lo2 = _mm512_set1_epi8(0x03);
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        stream_prefetcher pf(W, NR * ws, nb);
        for (int64_t i = 0; i < nb; ++i) {
            pf.step();
            const block_q8_k* xb[NT];
            __m256i bs[NT];
            for (int t = 0; t < NT; ++t) {
                xb[t] = reinterpret_cast<const block_q8_k*>(X + t * xs) + i;
                bs[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t]->bsums));
            }
            for (int r = 0; r < NR; ++r) {
                const block_q6_k* wb = reinterpret_cast<const block_q6_k*>(W + r * ws) + i;
                const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->scales)));
                const __m512i sc16z = _mm512_castsi256_si512(sc16);
                __m512i isum[NT];
                // q is stored +32: subtract 32 * sum_g sc_g * bsum_g
                for (int t = 0; t < NT; ++t)
                    isum[t] = _mm512_zextsi256_si512(
                        _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bs[t], sc16)), 5));
                for (int h = 0; h < 2; ++h) {
                    const __m512i L = _mm512_loadu_si512(wb->ql + 64 * h);
                    const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qh + 32 * h));
                    const __m512i hlo = _mm512_inserti64x4(_mm512_castsi256_si512(H), _mm256_srli_epi16(H, 2), 1);
                    const __m512i hhi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(H, 4)),
                                                           _mm256_srli_epi16(H, 6), 1);
                    const __m512i qlo = _mm512_or_si512(_mm512_and_si512(L, lo4),
                                                        _mm512_slli_epi16(_mm512_and_si512(hlo, lo2), 4));
                    const __m512i qhi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), lo4),
                                                        _mm512_slli_epi16(_mm512_and_si512(hhi, lo2), 4));
                    const __m512i slo = _mm512_permutexvar_epi16(idx16_4(8 * h), sc16z);
                    const __m512i shi = _mm512_permutexvar_epi16(idx16_4(8 * h + 4), sc16z);
                    for (int t = 0; t < NT; ++t) {
                        const __m512i x0 = _mm512_loadu_si512(xb[t]->qs + 128 * h);
                        const __m512i x1 = _mm512_loadu_si512(xb[t]->qs + 128 * h + 64);
                        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(qlo, x0), slo);
                        isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(qhi, x1), shi);
                    }
                }
                const float d = _cvtsh_ss(wb->d);
                for (int t = 0; t < NT; ++t)
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_set1_ps(d * xb[t]->d), acc[r][t]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

// ---- float weights x F32 activations ----------------------------------------------------------------
enum class fkind { f32, f16, bf16 };

template <fkind K>
struct k_float {
    static constexpr int nr_decode = 4, nr_batch = 4, nt_batch = 4;
    static inline __m512 load_w(const uint8_t* w, int64_t j, __mmask16 k) {
        if constexpr (K == fkind::f32) {
            return _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(w) + j);
        } else {
            const __m256i h = _mm256_maskz_loadu_epi16(k, reinterpret_cast<const uint16_t*>(w) + j);
            if constexpr (K == fkind::f16) return _mm512_cvtph_ps(h);
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
    }
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += 16) {
            const __mmask16 k = n - j >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1);
            __m512 xv[NT];
            for (int t = 0; t < NT; ++t) xv[t] = _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(X + t * xs) + j);
            for (int r = 0; r < NR; ++r) {
                const __m512 wv = load_w(W + r * ws, j, k);
                for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

}  // namespace

gemm_fn gemm_kernel_avx512(ggml_type w_type) {
    switch (w_type) {
        case ggml_type::Q8_0: return gemm_tiled_prepared<k_q8_0, x_pair>;
        case ggml_type::Q4_0: return gemm_tiled_prepared<k_q4_5_0<block_q4_0, 8>, x_pair>;
        case ggml_type::Q5_0: return gemm_tiled_prepared<k_q4_5_0<block_q5_0, 16>, x_pair>;
        case ggml_type::Q4_K: return gemm_tiled<k_q4_k>;
        case ggml_type::Q6_K: return gemm_tiled<k_q6_k>;
        case ggml_type::F32: return gemm_tiled<k_float<fkind::f32>>;
        case ggml_type::F16: return gemm_tiled<k_float<fkind::f16>>;
        case ggml_type::BF16: return gemm_tiled<k_float<fkind::bf16>>;
        default: return nullptr;  // Q4_1, Q5_1, Q5_K: scalar reference
    }
}

}  // namespace quant
}  // namespace specgen
