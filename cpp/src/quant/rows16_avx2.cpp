// AVX2 kernels of the rows16 layout (rows16.h): Q8_0 / Q5_0 / Q4_0 weights x Q8_0 activations and
// Q4_K, Q5_K, Q6_K x Q8_K, eight weight rows per ymm (a record's 16 rows as two halves, row r in 32-bit lane r % 8).
//
// AVX2 has no vpdpbusd: a block's integer dot product is vpmaddubsw (u8 x s8, adjacent pairs summed
// into int16, saturating) then vpmaddwd into int32 lanes. Neither ever saturates here (|x| <= 127,
// from the activation quantizers):
//   Q8_0: |w| x sign(x, w) (the sign trick of dot_avx2.cpp): a pair is at most 2 * 128 * 127 = 32512,
//         so each group of 4 elements is widened to int32 at once.
//   Q4_0 / Q5_0 (stored + 8 / + 16, at most 31): a pair is at most 2 * 31 * 128 = 7936, so four
//         groups (16 elements) add up in int16 before one widening; the offset is removed by the
//         per-token correction, as the AVX-512 kernel does.
//   Q4_K (nibbles, at most 15): a sub-block's eight groups add up in int16 (at most 30720) and one
//         vpmaddwd by the row's scale (in both halves of its lane) widens and scales them; Q5_K (at
//         most 31) widens every four groups (at most 31744).
// The results are the exact integers of rows16.h, so every output equals matmul_rows16_ref bit for bit
// (tests/test_quant.py), the same as the AVX-512 kernel's. One token takes the same path as many and
// a lane never depends on its neighbours (batch invariance). Compiled with -mavx2 -mfma -mf16c -mbmi2.
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "quant/kernels.h"
#include "quant/rows16.h"

namespace specgen {
namespace quant {
namespace {

#include "quant/gemm_tiles.h"
#include "quant/rows16_tiles.h"

constexpr int kHalf = kRows16 / 2;  // rows per ymm

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m256i broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// Ends a chain of integer adds here, for tiles of several tokens (the empty asm of
// quantize_act_avx2.cpp, here against reassociation): GCC otherwise turns a sub-block's 8 x NT maddubs
// results into a tree, computing them all first and spilling most of them to the stack. The sums are
// exact integers, so the order changes no result, only the code. One token keeps the compiler's
// schedule (pinning it measured 0.96x plain decoding: docs/bench/rows16-avx2-tiles-2026-12-06.md).
template <int NT>
inline void keep_order(__m256i& v) {
    if constexpr (NT > 1) __asm__("" : "+x"(v));
}

// 8 fp16 values (one per row of a half) as floats.
inline __m256 load_halfs(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// lo's low 16 bits | hi's low 16 bits << 16 per lane: the int16 operand of vpmaddwd (a row's scale in
// both halves of its lane, or the scales of two sub-blocks).
inline __m256i pair16(__m256i lo, __m256i hi) {
    return _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(hi, 16));
}

// Bit k of m -> byte k = 0xff.
inline __m256i expand_bits32(uint32_t m) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(m)), shuf);
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
}

// acc[t] += float(p[t]) * (d_w * d_x) for the half's 8 rows (d_w at dw_at, 8 fp16) and NT tokens
// (d_x from their preparation): a block's float work, the order of rows16.h.
// The record stream a half-pass prefetches along, at record rec of its group: the first half reads every
// line of the group, so it fetches this group's records; the second finds the group in cache and fetches
// the next group's (nb records on).
template <size_t RECORD_BYTES>
inline const uint8_t* pass_stream(const uint8_t* rec, int h, int64_t nb) {
    return h ? rec + nb * RECORD_BYTES : rec;
}

template <int NT, class Prep>
inline void add_scaled_block(const uint8_t* dw_at, const Prep* P, int64_t nb, int64_t b, const __m256i p[NT],
                             __m256 acc[NT]) {
    const __m256 dw = load_halfs(dw_at);
    for (int t = 0; t < NT; ++t)
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[t]), _mm256_mul_ps(dw, _mm256_set1_ps(P[t * nb + b].d)), acc[t]);
}

// Kernel policies (rows16_tiles.h) with block<NT>(rec, h, ...): adds half h of record `rec`, block b,
// to the NT tokens' accumulators.

// Q8_0 x Q8_0. Record: d[16] | q[8][64], q stored w ^ 0x80.
struct kernel_q8_0 {
    static constexpr int block_elems = QK;
    static constexpr size_t record_bytes = kRows16 * sizeof(block_q8_0);
    static constexpr bool prefetches_records = false;
    static constexpr int max_tile = 4;
    using prep = rows16_prep_legacy;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_legacy<0>(nb, X, xs, n_tok, P);  // the sign trick needs no correction
    }

    template <int NT>
    static void block(const uint8_t* rec, int h, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m256 acc[NT]) {
        const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
        const int8_t* xq[NT];
        __m256i p[NT];
        for (int t = 0; t < NT; ++t) {
            xq[t] = reinterpret_cast<const block_q8_0*>(X + t * xs)[b].qs;
            p[t] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 8; ++j) {
            const __m256i w = _mm256_xor_si256(load32(rec + 2 * kRows16 + 64 * j + 32 * h), bias);
            const __m256i aw = _mm256_sign_epi8(w, w);  // |w|
            for (int t = 0; t < NT; ++t) {
                const __m256i pairs = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(broadcast4(xq[t] + 4 * j), w));
                p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(pairs, ones));
            }
        }
        add_scaled_block<NT>(rec + 2 * kHalf * h, P, nb, b, p, acc);
    }
};

// Q4_0 / Q5_0 x Q8_0. Record: d[16] | (Q5_0: m[8] fifth-bit masks) | q[4][64] nibbles.
template <class B>
struct kernel_nibbles {
    static constexpr bool q5 = std::is_same<B, block_q5_0>::value;
    static constexpr int block_elems = QK;
    static constexpr size_t record_bytes = kRows16 * sizeof(B);
    static constexpr bool prefetches_records = false;
    static constexpr int max_tile = 4;
    using prep = rows16_prep_legacy;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_legacy<q5 ? 16 : 8>(nb, X, xs, n_tok, P);
    }

    // Elements 4j..4j+3 of the half's 8 rows, unsigned as stored.
    static inline __m256i weights(const uint8_t* rec, int h, int j) {
        const uint8_t* q = rec + 2 * kRows16 + (q5 ? 64 : 0) + 64 * (j % 4) + 32 * h;
        const __m256i v = j < 4 ? load32(q) : _mm256_srli_epi16(load32(q), 4);
        const __m256i w = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
        if constexpr (!q5) return w;
        uint32_t m;
        std::memcpy(&m, rec + 2 * kRows16 + 8 * j + 4 * h, 4);
        return _mm256_or_si256(w, _mm256_and_si256(expand_bits32(m), _mm256_set1_epi8(0x10)));
    }

    template <int NT>
    static void block(const uint8_t* rec, int h, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m256 acc[NT]) {
        const __m256i ones = _mm256_set1_epi16(1);
        const int8_t* xq[NT];
        __m256i p[NT];
        for (int t = 0; t < NT; ++t) {
            xq[t] = reinterpret_cast<const block_q8_0*>(X + t * xs)[b].qs;
            p[t] = _mm256_set1_epi32(P[t * nb + b].corr);
        }
        for (int j0 = 0; j0 < 8; j0 += 4) {
            __m256i s16[NT];
            for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
            for (int j = j0; j < j0 + 4; ++j) {
                const __m256i w = weights(rec, h, j);
                for (int t = 0; t < NT; ++t) {
                    s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(w, broadcast4(xq[t] + 4 * j)));
                    keep_order<NT>(s16[t]);
                }
            }
            for (int t = 0; t < NT; ++t) p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(s16[t], ones));
        }
        add_scaled_block<NT>(rec + 2 * kHalf * h, P, nb, b, p, acc);
    }
};

// Q4_K x Q8_K. Record: d[16] | dmin[16] | sc[8][16] | m[4][32] | q[4][8][64] (rows16.h).
template <bool FIFTH_BIT>
struct kernel_q4_5_k {
    static constexpr int block_elems = QK_K;
    static constexpr size_t record_bytes = FIFTH_BIT ? kRows16Q5kRecord : kRows16Q4kRecord;
    static constexpr bool prefetches_records = true;
    // Q4_K: a draft_max 4-5 verification in one tile; a cap of 8 spilled the sums in the inner loop
    // again (docs/bench/rows16-avx2-tiles-2026-12-06.md). Q5_K, whose fifth bits take more registers,
    // keeps its measured 4.
    static constexpr int max_tile = FIFTH_BIT ? 4 : 6;
    using prep = rows16_prep_q4_k;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_q4_k(nb, X, xs, n_tok, P);
    }

    // isum[t] += sub-block s = 2c + HIGH's scaled dot product for the NT tokens: chunk c's high nibbles
    // when HIGH, its low ones otherwise. HIGH is a template argument, so the loop over a block has no
    // branch (a runtime `s % 2` compiled to one per weight vector). The row's scale in both int16 halves
    // of its lane widens the int16 sums: all eight groups at once for nibbles, four at a time for 5-bit
    // values (2 x 31 x 128 per vpmaddubsw pair).
    template <int NT, int HIGH>
    static void sub_block(const uint8_t* rec, int h, int c, const int8_t* const xq[NT], int64_t nb, __m256i isum[NT]) {
        const int s = 2 * c + HIGH;
        prefetch_record_slice<NT, record_bytes, 8>(pass_stream<record_bytes>(rec, h, nb), s);
        const __m256i lo4 = _mm256_set1_epi8(0x0f);
        const __m256i sc32 =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec + 64 + 16 * s + kHalf * h)));
        const __m256i sc = pair16(sc32, sc32);
        __m256i s16[NT];
        for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const __m256i q = load32(rec + 320 + 64 * (8 * c + j) + 32 * h);
            __m256i w = _mm256_and_si256(HIGH ? _mm256_srli_epi16(q, 4) : q, lo4);
            if constexpr (FIFTH_BIT) {
                uint64_t m;
                std::memcpy(&m, rec + kRows16Q4kRecord + 8 * (8 * s + j), 8);
                w = _mm256_add_epi8(w, _mm256_and_si256(expand_bits32(uint32_t(m >> (32 * h))), _mm256_set1_epi8(16)));
            }
            for (int t = 0; t < NT; ++t) {
                s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(w, broadcast4(xq[t] + 32 * s + 4 * j)));
                keep_order<NT>(s16[t]);
            }
            if (FIFTH_BIT && j == 3)
                for (int t = 0; t < NT; ++t) {
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
                    s16[t] = _mm256_setzero_si256();
                }
        }
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
    }

    template <int NT>
    static void block(const uint8_t* rec, int h, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m256 acc[NT]) {
        const int8_t* xq[NT];
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) {
            xq[t] = reinterpret_cast<const block_q8_k*>(X + t * xs)[b].qs;
            isum[t] = _mm256_setzero_si256();
        }
        for (int c = 0; c < 4; ++c) {  // chunk c holds sub-blocks 2c (low nibbles) and 2c + 1 (high)
            sub_block<NT, 0>(rec, h, c, xq, nb, isum);
            sub_block<NT, 1>(rec, h, c, xq, nb, isum);
        }
        const __m256 dw = load_halfs(rec + 2 * kHalf * h), dmin = load_halfs(rec + 32 + 2 * kHalf * h);
        __m256i m[4];
        for (int i = 0; i < 4; ++i)
            m[i] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 192 + 32 * i + 2 * kHalf * h)));
        for (int t = 0; t < NT; ++t) {
            const prep& xp = P[t * nb + b];
            __m256i msum = _mm256_setzero_si256();
            for (int i = 0; i < 4; ++i)
                msum = _mm256_add_epi32(msum, _mm256_madd_epi16(m[i], _mm256_set1_epi32(xp.bs_pairs[i])));
            const __m256 dx = _mm256_set1_ps(xp.d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, dx), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[t]);
        }
    }
};

// Q6_K x Q8_K. A sub-block's 4 weight vectors are its nibbles with their top 2 bits or-ed in at bits 4-5
// (at most 63, so two groups add up in int16: 2 x 2 x 63 x 128 = 32256), widened and scaled by
// vpmaddwd with the row's int8 scale in both halves of its lane. The offset (stored + 32) is removed
// once per block: isum -= 32 * sum_s sc_s * bsum_s, by vpmaddwd on (sc_2i, sc_2i+1) pairs.
struct kernel_q6_k {
    static constexpr int block_elems = QK_K;
    static constexpr size_t record_bytes = kRows16Q6kRecord;
    static constexpr bool prefetches_records = true;
    static constexpr int max_tile = 16;  // unpacking a record's 6-bit values costs more than its products: share it among more tokens
    using prep = rows16_prep_q6_k;
    static void prepare(int64_t nb, const uint8_t* X, size_t xs, int n_tok, prep* P) {
        rows16_prepare_q6_k(nb, X, xs, n_tok, P);
    }

    // Row r's scale of sub-block s, sign-extended to int32 (lane r % 8 of half h).
    static __m256i scale32(const uint8_t* rec, int h, int s) {
        return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rec + 32 + 16 * s + kHalf * h)));
    }

    // Sub-block s = 4g + K of half h, its weight vectors: K is a template argument, so the shifts that
    // place its nibbles and top bits are constants and the loop over a block has no branch.
    template <int K>
    static void weights(const uint8_t* ql, const uint8_t* qh, int g, __m256i w[4]) {
        const __m256i lo4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30);
        for (int j = 0; j < 4; ++j) {
            __m256i lo = load32(ql + 64 * (4 * (2 * g + K / 2) + j));
            if constexpr (K % 2) lo = _mm256_srli_epi16(lo, 4);
            __m256i hi = load32(qh + 64 * (4 * g + j));
            // bits 2K, 2K + 1 of each byte to bits 4-5 (16-bit shifts keep them in their byte)
            if constexpr (K == 0) hi = _mm256_slli_epi16(hi, 4);
            if constexpr (K == 1) hi = _mm256_slli_epi16(hi, 2);
            if constexpr (K == 3) hi = _mm256_srli_epi16(hi, 2);
            w[j] = _mm256_or_si256(_mm256_and_si256(lo, lo4), _mm256_and_si256(hi, top2));
        }
    }

    // isum[t] += sub-block s = 4g + K's scaled dot product for the NT tokens.
    template <int NT, int K>
    static void sub_block(const uint8_t* rec, int h, const uint8_t* ql, const uint8_t* qh, int g, const int8_t* const xq[NT],
                          int64_t nb, __m256i isum[NT]) {
        const int s = 4 * g + K;
        prefetch_record_slice<NT, record_bytes, 16>(pass_stream<record_bytes>(rec, h, nb), s);
        __m256i w[4];
        weights<K>(ql, qh, g, w);
        const __m256i sc32 = scale32(rec, h, s);
        const __m256i sc = pair16(sc32, sc32);
        for (int t = 0; t < NT; ++t) {
            const int8_t* x = xq[t] + 16 * s;
            const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(w[0], broadcast4(x)),
                                               _mm256_maddubs_epi16(w[1], broadcast4(x + 4)));
            const __m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(w[2], broadcast4(x + 8)),
                                               _mm256_maddubs_epi16(w[3], broadcast4(x + 12)));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(a, sc), _mm256_madd_epi16(c, sc)));
        }
    }

    template <int NT>
    static void block(const uint8_t* rec, int h, const uint8_t* X, size_t xs, const prep* P, int64_t nb, int64_t b,
                      __m256 acc[NT]) {
        const uint8_t* ql = rec + 288 + 32 * h;
        const uint8_t* qh = rec + 288 + 2048 + 32 * h;
        const int8_t* xq[NT];
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) {
            xq[t] = reinterpret_cast<const block_q8_k*>(X + t * xs)[b].qs;
            isum[t] = _mm256_setzero_si256();
        }
        for (int g = 0; g < 4; ++g) {  // the 4 sub-blocks that share a qh group
            sub_block<NT, 0>(rec, h, ql, qh, g, xq, nb, isum);
            sub_block<NT, 1>(rec, h, ql, qh, g, xq, nb, isum);
            sub_block<NT, 2>(rec, h, ql, qh, g, xq, nb, isum);
            sub_block<NT, 3>(rec, h, ql, qh, g, xq, nb, isum);
        }
        __m256i sc_pairs[8];
        for (int i = 0; i < 8; ++i)
            sc_pairs[i] = pair16(scale32(rec, h, 2 * i), scale32(rec, h, 2 * i + 1));
        for (int t = 0; t < NT; ++t) {
            __m256i m = _mm256_setzero_si256();
            for (int i = 0; i < 8; ++i)
                m = _mm256_add_epi32(m, _mm256_madd_epi16(sc_pairs[i], _mm256_set1_epi32(P[t * nb + b].bs_pairs[i])));
            isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(m, 5));
        }
        add_scaled_block<NT>(rec + 2 * kHalf * h, P, nb, b, isum, acc);
    }
};

// Half h of one group (its first n_valid rows stored) x NT tokens: the records stream through once,
// block by block, while the tokens' sums stay in registers. The first half reads every cache line of
// the group (a record row holds both halves) and prefetches the rest of it; the second half finds the
// group in cache and prefetches the next group's first half, so no group starts cold.
template <class K, int NT>
void run_tile(int64_t nb, const uint8_t* G, int h, const uint8_t* X, size_t xs, const typename K::prep* P, float* Y,
              int64_t ys, int n_valid) {
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const size_t bytes = nb * K::record_bytes;
    stream_prefetcher pf(h == 0 ? G : G + bytes, h == 0 ? bytes : bytes / 2, nb);
    for (int64_t b = 0; b < nb; ++b) {
        if constexpr (!sliced_prefetch<K, NT>) pf.step();
        K::template block<NT>(G + b * K::record_bytes, h, X, xs, P, nb, b, acc);
    }
    if (n_valid >= kHalf) {
        for (int t = 0; t < NT; ++t) _mm256_storeu_ps(Y + t * ys, acc[t]);
    } else {
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int t = 0; t < NT; ++t) _mm256_maskstore_ps(Y + t * ys, keep, acc[t]);
    }
}

// The tiles of rows16_tiles.h's driver: each half of each group.
template <class K, int NT>
void groups_loop(int64_t nb, const uint8_t* W, size_t ws, int n_rows, const uint8_t* X, size_t xs,
                 const typename K::prep* P, float* Y, int64_t ys) {
    for (int r = 0; r < n_rows; r += kRows16)
        for (int h = 0; h < 2 && r + kHalf * h < n_rows; ++h)
            run_tile<K, NT>(nb, W + r * ws, h, X, xs, P, Y + r + kHalf * h, ys, n_rows - r - kHalf * h);
}

}  // namespace

gemm_fn gemm_kernel_rows16_avx2(ggml_type w_type) {
    switch (w_type) {
        case ggml_type::Q8_0: return gemm_rows16<kernel_q8_0>;
        case ggml_type::Q4_0: return gemm_rows16<kernel_nibbles<block_q4_0>>;
        case ggml_type::Q5_0: return gemm_rows16<kernel_nibbles<block_q5_0>>;
        case ggml_type::Q4_K: return gemm_rows16<kernel_q4_5_k<false>>;
        case ggml_type::Q5_K: return gemm_rows16<kernel_q4_5_k<true>>;
        case ggml_type::Q6_K: return gemm_rows16<kernel_q6_k>;
        default: return nullptr;
    }
}

}  // namespace quant
}  // namespace specgen
