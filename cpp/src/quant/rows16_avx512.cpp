// AVX-512 VNNI kernels of the rows16 layout (rows16.h): Q8_0 / Q5_0 / Q4_0 weights x Q8_0 activations
// and Q4_K, Q5_K, Q6_K x Q8_K (below),
// sixteen weight rows per zmm (row r in 32-bit lane r).
//
// Per block and token: p = corr, then for j = 0..7 p = vpdpbusd(p, w_j, x[4j..4j+3] broadcast), which
// leaves each row's exact integer dot product of the block in its lane (corr = -offset * the block's
// sum of x, prepared once per token and block: vpdpbusd needs unsigned weights, which are stored +
// offset); then acc = fma(float(p), d_w * d_x, acc) and y = acc, stored 16 rows at once. The weights
// of a block stay in registers while every token of a tile passes over them. One token takes the same
// path as many, and a lane's arithmetic never depends on its neighbours (batch invariance).
// Checked bit-exact against matmul_rows16_ref by tests/test_quant.py; compiled with -mavx512f/bw/vl/dq/vnni.
#include <immintrin.h>

#include <cstring>
#include <vector>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "quant/kernels.h"
#include "quant/rows16.h"

namespace specgen {
namespace quant {
namespace {

#include "quant/gemm_tiles.h"
#include "quant/rows16_tiles.h"

// The unsigned weights of a record: w[j] holds elements 4j..4j+3 of the 16 rows.
template <class B>
struct record;

template <>
struct record<block_q8_0> {
    static constexpr int offset = 128;
    static void load(const uint8_t* rec, __m512i w[8]) {
        for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(rec + 2 * kRows16 + 64 * j);
    }
};

template <>
struct record<block_q4_0> {
    static constexpr int offset = 8;
    static void load(const uint8_t* rec, __m512i w[8]) {
        const __m512i m = _mm512_set1_epi8(0x0f);
        for (int j = 0; j < 4; ++j) {
            const __m512i q = _mm512_loadu_si512(rec + 2 * kRows16 + 64 * j);
            w[j] = _mm512_and_si512(q, m);
            w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);
        }
    }
};

template <>
struct record<block_q5_0> {
    static constexpr int offset = 16;
    static void load(const uint8_t* rec, __m512i w[8]) {
        const __m512i m = _mm512_set1_epi8(0x0f), sixteen = _mm512_set1_epi8(16);
        const uint8_t* masks = rec + 2 * kRows16;
        for (int j = 0; j < 4; ++j) {
            const __m512i q = _mm512_loadu_si512(masks + 64 + 64 * j);
            w[j] = _mm512_and_si512(q, m);
            w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);
        }
        for (int j = 0; j < 8; ++j) {
            uint64_t k;
            std::memcpy(&k, masks + 8 * j, 8);
            w[j] = _mm512_mask_add_epi8(w[j], __mmask64(k), w[j], sixteen);
        }
    }
};

inline __m512i broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// The lanes a tile stores: the first n_valid rows of its group.
inline __mmask16 valid_rows(int n_valid) {
    return n_valid >= kRows16 ? __mmask16(0xffff) : __mmask16((1u << n_valid) - 1);
}

// Kernel policies (rows16_tiles.h) with block<NT>: adds record `rec`, block b, to the NT tokens'
// accumulators.

// The 32-element types (Q8_0 / Q5_0 / Q4_0) x Q8_0.
template <class B>
struct kernel_legacy {
    static constexpr int block_elems = QK;
    static constexpr size_t record_bytes = kRows16 * sizeof(B);
    static constexpr bool prefetches_records = true;
    static constexpr int prefetch_ahead = 4;  // records of 6-9 lines: 2 ahead is too close to arrive in time
    static constexpr int max_tile = 16;  // a verification of draft_max 8 (9 rows) in one tile

    using prep = rows16_prep_legacy;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_legacy<record<B>::offset>(nb, X, xs, n_tok, P);
    }

    template <int NT>
    static void block(const uint8_t* rec, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m512 acc[NT]) {
        __m512i w[8];
        record<B>::load(rec, w);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
        for (int t = 0; t < NT; ++t) {
            prefetch_record_slice<NT, record_bytes, NT, prefetch_ahead>(rec, t);
            const prep& xp = P[t * nb + b];
            const int8_t* xq = reinterpret_cast<const block_q8_0*>(X + t * xs)[b].qs;
            __m512i p = _mm512_set1_epi32(xp.corr);
            if constexpr (NT < 4) {
                // Few tokens: two chains hide vpdpbusd's latency (integer sums: the split is exact).
                __m512i q = _mm512_setzero_si512();
                for (int j = 0; j < 8; j += 2) {
                    p = _mm512_dpbusd_epi32(p, w[j], broadcast4(xq + 4 * j));
                    q = _mm512_dpbusd_epi32(q, w[j + 1], broadcast4(xq + 4 * j + 4));
                }
                p = _mm512_add_epi32(p, q);
            } else {
                for (int j = 0; j < 8; ++j) p = _mm512_dpbusd_epi32(p, w[j], broadcast4(xq + 4 * j));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_set1_ps(xp.d)), acc[t]);
        }
    }
};

// Q4_K / Q5_K x Q8_K. Per block and token: for each sub-block s, p_s = sum over j of vpdpbusd(0, w_j,
// x[32s + 4j..] broadcast) (q is unsigned: no offset), isum += sc_s * p_s (vpmulld: exact);
// msum = sum_s m_s * bsum_s by vpdpwssd on (m_2i, m_2i+1) pairs; then the two fmas of rows16.h.
// Q5_K (FIFTH_BIT) adds 16 to the nibbles its masks mark.
template <bool FIFTH_BIT>
struct kernel_q4_5_k {
    static constexpr int block_elems = QK_K;
    static constexpr size_t record_bytes = FIFTH_BIT ? kRows16Q5kRecord : kRows16Q4kRecord;
    static constexpr bool prefetches_records = true;
    static constexpr int max_tile = 16;  // verifications of up to 16 rows unpack each record once

    using prep = rows16_prep_q4_k;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_q4_k(nb, X, xs, n_tok, P);
    }

    template <int NT>
    static void block(const uint8_t* rec, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m512 acc[NT]) {
        const __m512i lo4 = _mm512_set1_epi8(0x0f);
        __m512i isum[NT], msum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
        for (int s = 0; s < 8; ++s) {
            prefetch_record_slice<NT, record_bytes, 8>(rec, s);
            // sub-block s: chunk s / 2, low nibbles when s is even
            __m512i w[8];
            for (int j = 0; j < 8; ++j) {
                const __m512i q = _mm512_loadu_si512(rec + 320 + 64 * (8 * (s / 2) + j));
                w[j] = _mm512_and_si512(s % 2 ? _mm512_srli_epi16(q, 4) : q, lo4);
                if constexpr (FIFTH_BIT) {
                    uint64_t m;
                    std::memcpy(&m, rec + kRows16Q4kRecord + 8 * (8 * s + j), 8);
                    w[j] = _mm512_mask_add_epi8(w[j], __mmask64(m), w[j], _mm512_set1_epi8(16));
                }
            }
            const __m512i sc =
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 64 + 16 * s)));
            for (int t = 0; t < NT; ++t) {
                const int8_t* xq = reinterpret_cast<const block_q8_k*>(X + t * xs)[b].qs + 32 * s;
                __m512i p = _mm512_setzero_si512(), q = _mm512_setzero_si512();
                for (int j = 0; j < 8; j += 2) {
                    p = _mm512_dpbusd_epi32(p, w[j], broadcast4(xq + 4 * j));
                    q = _mm512_dpbusd_epi32(q, w[j + 1], broadcast4(xq + 4 * j + 4));
                }
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(p, q), sc));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 32)));
        __m512i m[4];
        for (int i = 0; i < 4; ++i)
            m[i] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 192 + 32 * i)));
        for (int t = 0; t < NT; ++t) {
            const prep& xp = P[t * nb + b];
            for (int i = 0; i < 4; ++i)
                msum[t] = _mm512_dpwssd_epi32(msum[t], m[i], _mm512_set1_epi32(xp.bs_pairs[i]));
            const __m512 dx = _mm512_set1_ps(xp.d);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, dx), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(dmin, dx), acc[t]);
        }
    }
};

// Q6_K x Q8_K. Per block and token: for each sub-block s, p_s = corr_s + sum over j of vpdpbusd(w_j,
// x[16s + 4j..] broadcast), the exact (q - 32) . x, and isum += sc_s * p_s (vpmulld); then one fma.
// A sub-block's 4 weight vectors are its nibbles with their top 2 bits or-ed in at bits 4-5.
struct kernel_q6_k {
    static constexpr int block_elems = QK_K;
    static constexpr size_t record_bytes = kRows16Q6kRecord;
    static constexpr bool prefetches_records = true;
    static constexpr int max_tile = 16;  // 4 weight vectors a sub-block: 16 tokens' sums still fit in registers

    using prep = rows16_prep_q6_k;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_q6_k(nb, X, xs, n_tok, P);
    }

    template <int NT>
    static void block(const uint8_t* rec, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m512 acc[NT]) {
        const __m512i lo4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
        const uint8_t* ql = rec + 288;
        const uint8_t* qh = ql + 2048;
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
        for (int s = 0; s < 16; ++s) {
            prefetch_record_slice<NT, record_bytes, 16>(rec, s);
            __m512i w[4];
            for (int j = 0; j < 4; ++j) {
                __m512i lo = _mm512_loadu_si512(ql + 64 * (4 * (s / 2) + j));
                if (s % 2) lo = _mm512_srli_epi16(lo, 4);
                __m512i hi = _mm512_loadu_si512(qh + 64 * (4 * (s / 4) + j));
                // bits 2k, 2k + 1 (k = s % 4) of each byte to bits 4-5; 16-bit shifts keep them in their byte
                switch (s % 4) {
                    case 0: hi = _mm512_slli_epi16(hi, 4); break;
                    case 1: hi = _mm512_slli_epi16(hi, 2); break;
                    case 3: hi = _mm512_srli_epi16(hi, 2); break;
                    default: break;
                }
                // (lo & 0x0f) | (hi & 0x30): 0xEC is the truth table of (a & c) | b
                w[j] = _mm512_ternarylogic_epi32(lo, _mm512_and_si512(hi, top2), lo4, 0xEC);
            }
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 32 + 16 * s)));
            for (int t = 0; t < NT; ++t) {
                const int8_t* xq = reinterpret_cast<const block_q8_k*>(X + t * xs)[b].qs + 16 * s;
                __m512i p = _mm512_set1_epi32(P[t * nb + b].corr[s]), q = _mm512_setzero_si512();
                p = _mm512_dpbusd_epi32(p, w[0], broadcast4(xq));
                q = _mm512_dpbusd_epi32(q, w[1], broadcast4(xq + 4));
                p = _mm512_dpbusd_epi32(p, w[2], broadcast4(xq + 8));
                q = _mm512_dpbusd_epi32(q, w[3], broadcast4(xq + 12));
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(p, q), sc));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
        for (int t = 0; t < NT; ++t)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, _mm512_set1_ps(P[t * nb + b].d)),
                                     acc[t]);
    }
};

// One group of 16 rows (the first n_valid of them stored) x NT tokens: the records stream through once,
// block by block, while the tokens' sums stay in registers.
template <class K, int NT>
void run_tile(int64_t nb, const uint8_t* G, const uint8_t* X, size_t xs, const typename K::prep* P, float* Y,
              int64_t ys, int n_valid) {
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    stream_prefetcher pf(G, nb * K::record_bytes, nb);
    for (int64_t b = 0; b < nb; ++b) {
        if constexpr (!sliced_prefetch<K, NT>) pf.step();
        K::template block<NT>(G + b * K::record_bytes, X, xs, P, nb, b, acc);
    }
    const __mmask16 keep = valid_rows(n_valid);
    for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(Y + t * ys, keep, acc[t]);
}

// The tiles of rows16_tiles.h's driver: one per group.
template <class K, int NT>
void groups_loop(int64_t nb, const uint8_t* W, size_t ws, int n_rows, const uint8_t* X, size_t xs,
                 const typename K::prep* P, float* Y, int64_t ys) {
    for (int r = 0; r < n_rows; r += kRows16)
        run_tile<K, NT>(nb, W + r * ws, X, xs, P, Y + r, ys, n_rows - r);
}

}  // namespace

gemm_fn gemm_kernel_rows16_avx512(ggml_type w_type) {
    switch (w_type) {
        case ggml_type::Q8_0: return gemm_rows16<kernel_legacy<block_q8_0>>;
        case ggml_type::Q4_0: return gemm_rows16<kernel_legacy<block_q4_0>>;
        case ggml_type::Q5_0: return gemm_rows16<kernel_legacy<block_q5_0>>;
        case ggml_type::Q4_K: return gemm_rows16<kernel_q4_5_k<false>>;
        case ggml_type::Q5_K: return gemm_rows16<kernel_q4_5_k<true>>;
        case ggml_type::Q6_K: return gemm_rows16<kernel_q6_k>;
        default: return nullptr;
    }
}

}  // namespace quant
}  // namespace specgen
