// AVX2/FMA/F16C matrix kernels: Y[t, r] = dot(W row r, X row t) for
//   Q8_0, Q4_0, Q5_0 x Q8_0  (one 32-element block per ymm, vpmaddubsw + vpmaddwd)
//   Q4_K, Q6_K x Q8_K         (vpmaddubsw, then vpmaddwd with 16-bit sub-block scales)
//   F32, F16, BF16 x F32
// Layouts in kernels.h. Checked against the scalar *_ref kernels by tests/test_quant.py (integer
// parts exact, only float summation order differs); each kernel is the vec_dot of this ISA (tiles
// never change an output, see gemm_tiles.h). Q8_0 activations must come from quantize_row
// (|q| <= 127): the sign trick below negates x.
// Compiled with -mavx2 -mfma -mf16c -mbmi2 (CMakeLists.txt); only called when the CPU allows.
#include <immintrin.h>

#include <type_traits>
#include <vector>

#include "quant/kernels.h"

namespace specgen {
namespace quant {
namespace {

#include "quant/gemm_tiles.h"

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Sum of u8 x s8 products per 4 bytes -> 8 int32 (no saturation for |u*x| pairs < 2^15).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes 0..15 in element order (low nibbles first).
inline __m256i unpack_nibbles16(const uint8_t* q) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
}

// Bit j of qh -> byte j = 0xff.
inline __m256i expand_bits32(uint32_t qh) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
}

// Q8_0 / Q4_0 / Q5_0 weights x Q8_0: W_KIND selects how a block's 32 weights are formed.
enum class legacy { q8_0, q4_0, q5_0 };

template <legacy KIND>
struct k_legacy {
    using B = typename std::conditional<KIND == legacy::q8_0, block_q8_0,
                                        typename std::conditional<KIND == legacy::q4_0, block_q4_0, block_q5_0>::type>::type;
    static constexpr int nr_decode = 4, nr_batch = 2, nt_batch = 4;
    // Signed weights in -128..127 (Q4_0/Q5_0 offset already removed).
    static inline __m256i load_w(const B& b) {
        if constexpr (KIND == legacy::q8_0) {
            return load32(b.qs);
        } else if constexpr (KIND == legacy::q4_0) {
            return _mm256_sub_epi8(unpack_nibbles16(b.qs), _mm256_set1_epi8(8));
        } else {
            uint32_t qh;
            std::memcpy(&qh, b.qh, 4);
            const __m256i hi = _mm256_and_si256(expand_bits32(qh), _mm256_set1_epi8(0x10));
            return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles16(b.qs), hi), _mm256_set1_epi8(16));
        }
    }
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK;
        __m256 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
        stream_prefetcher pf(W, NR * ws, nb);
        for (int64_t b = 0; b < nb; ++b) {
            pf.step();
            __m256i xq[NT];
            float xd[NT];
            for (int t = 0; t < NT; ++t) {
                const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(X + t * xs)[b];
                xq[t] = load32(xb.qs);
                xd[t] = _cvtsh_ss(xb.d);
            }
            for (int r = 0; r < NR; ++r) {
                const B& wb = reinterpret_cast<const B*>(W + r * ws)[b];
                const __m256i wq = load_w(wb);
                const __m256i aw = _mm256_sign_epi8(wq, wq);  // |w|
                const float wd = _cvtsh_ss(wb.d);
                for (int t = 0; t < NT; ++t) {
                    const __m256i p = dot_u8s8(aw, _mm256_sign_epi8(xq[t], wq));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(wd * xd[t]), acc[r][t]);
                }
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

struct k_q4_k {
    static constexpr int nr_decode = 4, nr_batch = 2, nt_batch = 4;
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK_K;
        const __m256i lo4 = _mm256_set1_epi8(0x0f);
        const __m128i dup = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        __m256 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
        stream_prefetcher pf(W, NR * ws, nb);
        for (int64_t i = 0; i < nb; ++i) {
            pf.step();
            const block_q8_k* xb[NT];
            for (int t = 0; t < NT; ++t) xb[t] = reinterpret_cast<const block_q8_k*>(X + t * xs) + i;
            for (int r = 0; r < NR; ++r) {
                const block_q4_k* wb = reinterpret_cast<const block_q4_k*>(W + r * ws) + i;
                uint8_t sc[8], m[8];
                unpack_k_scales(wb->scales, sc, m);
                uint64_t mw;
                std::memcpy(&mw, m, 8);
                const __m256i m16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(mw)), dup));
                __m256i isum[NT];
                for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
                for (int c = 0; c < 4; ++c) {
                    const __m256i q = load32(wb->qs + 32 * c);
                    const __m256i ql = _mm256_and_si256(q, lo4), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4);
                    const __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
                    for (int t = 0; t < NT; ++t) {
                        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(ql, load32(xb[t]->qs + 64 * c)), s0);
                        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(qh, load32(xb[t]->qs + 64 * c + 32)), s1);
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p0, p1));
                    }
                }
                const float d = _cvtsh_ss(wb->d), dmin = _cvtsh_ss(wb->dmin);
                for (int t = 0; t < NT; ++t) {
                    const __m256i mi = _mm256_madd_epi16(load32(xb[t]->bsums), m16);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * xb[t]->d), acc[r][t]);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mi), _mm256_set1_ps(-(dmin * xb[t]->d)), acc[r][t]);
                }
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

struct k_q6_k {
    static constexpr int nr_decode = 4, nr_batch = 2, nt_batch = 4;
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        const int64_t nb = n / QK_K;
        const __m256i lo4 = _mm256_set1_epi8(0x0f), lo2 = _mm256_set1_epi8(0x03);
        __m256 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
        stream_prefetcher pf(W, NR * ws, nb);
        for (int64_t i = 0; i < nb; ++i) {
            pf.step();
            const block_q8_k* xb[NT];
            for (int t = 0; t < NT; ++t) xb[t] = reinterpret_cast<const block_q8_k*>(X + t * xs) + i;
            for (int r = 0; r < NR; ++r) {
                const block_q6_k* wb = reinterpret_cast<const block_q6_k*>(W + r * ws) + i;
                const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->scales)));
                __m256i isum[NT];
                // q is stored +32: start from -32 * sum_g sc_g * bsum_g
                for (int t = 0; t < NT; ++t)
                    isum[t] = _mm256_slli_epi32(
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(load32(xb[t]->bsums), sc16)), 5);
                for (int h = 0; h < 2; ++h) {
                    const __m256i L0 = load32(wb->ql + 64 * h), L1 = load32(wb->ql + 64 * h + 32);
                    const __m256i H = load32(wb->qh + 32 * h);
                    __m256i q[4];
                    q[0] = _mm256_or_si256(_mm256_and_si256(L0, lo4), _mm256_slli_epi16(_mm256_and_si256(H, lo2), 4));
                    q[1] = _mm256_or_si256(_mm256_and_si256(L1, lo4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), lo2), 4));
                    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), lo4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), lo2), 4));
                    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), lo4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), lo2), 4));
                    for (int k = 0; k < 4; ++k) {
                        const int g = 8 * h + 2 * k;
                        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(wb->scales[g + 1]), _mm_set1_epi16(wb->scales[g]));
                        for (int t = 0; t < NT; ++t) {
                            const __m256i p = _mm256_maddubs_epi16(q[k], load32(xb[t]->qs + 128 * h + 32 * k));
                            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, s));
                        }
                    }
                }
                const float d = _cvtsh_ss(wb->d);
                for (int t = 0; t < NT; ++t)
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * xb[t]->d), acc[r][t]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

enum class fkind { f32, f16, bf16 };

template <fkind K>
struct k_float {
    static constexpr int nr_decode = 4, nr_batch = 2, nt_batch = 4;
    // 8 weights from element j; a ragged tail is copied into a zero-padded buffer first.
    static inline __m256 load_w(const uint8_t* w, int64_t j, int64_t n) {
        constexpr size_t es = K == fkind::f32 ? 4 : 2;
        alignas(32) uint8_t tail[32] = {};
        const uint8_t* p = w + j * es;
        if (n - j < 8) {
            std::memcpy(tail, p, (n - j) * es);
            p = tail;
        }
        if constexpr (K == fkind::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        if constexpr (K == fkind::f16) return _mm256_cvtph_ps(h);
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static inline __m256 load_x(const float* x, int64_t j, int64_t n) {
        if (n - j >= 8) return _mm256_loadu_ps(x + j);
        alignas(32) float tail[8] = {};
        std::memcpy(tail, x + j, (n - j) * sizeof(float));
        return _mm256_load_ps(tail);
    }
    template <int NR, int NT>
    static void run(int64_t n, const uint8_t* W, size_t ws, const uint8_t* X, size_t xs, float* Y, int64_t ys) {
        __m256 acc[NR][NT];
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j += 8) {
            __m256 xv[NT];
            for (int t = 0; t < NT; ++t) xv[t] = load_x(reinterpret_cast<const float*>(X + t * xs), j, n);
            for (int r = 0; r < NR; ++r) {
                const __m256 wv = load_w(W + r * ws, j, n);
                for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int t = 0; t < NT; ++t) Y[t * ys + r] = hsum(acc[r][t]);
    }
};

}  // namespace

gemm_fn gemm_kernel_avx2(ggml_type w_type) {
    switch (w_type) {
        case ggml_type::Q8_0: return gemm_tiled<k_legacy<legacy::q8_0>>;
        case ggml_type::Q4_0: return gemm_tiled<k_legacy<legacy::q4_0>>;
        case ggml_type::Q5_0: return gemm_tiled<k_legacy<legacy::q5_0>>;
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
