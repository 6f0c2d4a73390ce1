// AVX2 activation quantizers (float rows -> Q8_0 / Q8_K), the step before every quantized matmul.
// Every output byte equals the scalar reference's (q8_0.cpp, q8_k.cpp) for every finite input: the
// same amax (max is exact in any order), d and id from the same scalar float ops, and the reference's
// rounding rebuilt from exact float steps. Checked byte for byte by tests/test_quant.py.
// Compiled with -mavx2 -mfma -mf16c -mbmi2 (CMakeLists.txt); only called when the CPU allows.
#include <immintrin.h>


#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {
namespace {

// x*id rounded to float, as the reference computes it: the empty asm makes sure GCC
// (-ffp-contract=fast, -mfma) can never fuse the product into the add that follows.
inline __m256 product(__m256 a, __m256 b) {
    __m256 p = _mm256_mul_ps(a, b);
    __asm__("" : "+x"(p));
    return p;
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// max |x[j]| for j < 32*n4 (n4 groups of 32 floats).
inline float amax_of(const float* x, int n4) {
    __m256 m[4];
    for (int k = 0; k < 4; ++k) m[k] = abs_ps(_mm256_loadu_ps(x + 8 * k));
    for (int j = 1; j < n4; ++j)
        for (int k = 0; k < 4; ++k) m[k] = _mm256_max_ps(m[k], abs_ps(_mm256_loadu_ps(x + 32 * j + 8 * k)));
    return hmax(_mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3])));
}

// 4 x 8 int32 in [-128, 127] -> 32 int8 in element order (packs interleaves the 128-bit lanes).
inline __m256i pack_i8(const __m256i q[4]) {
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// std::round (half away from zero): t = trunc(v) and f = v - t are exact, so |f| >= 0.5 decides
// exactly; adding 0.5 before truncating would round 0.49999997 up.
inline __m256i round_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));  // sign(v)
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// nearest_int (kquant_search.h): float add of +-0.5 (chosen by v >= 0), then truncate, then the
// reference's clamp to [-127, 127] in int (cvttps's 0x80000000 for overflow clamps as it does there).
inline __m256i nearest_clamped(__m256 v) {
    const __m256 half = _mm256_blendv_ps(_mm256_set1_ps(-0.5f), _mm256_set1_ps(0.5f),
                                         _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ));
    const __m256i q = _mm256_cvttps_epi32(_mm256_add_ps(v, half));
    return _mm256_min_epi32(_mm256_max_epi32(q, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
}

void quant_q8_0_avx2(const float* src, void* dst, int64_t n) {
    block_q8_0* b = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float* x = src + i * QK;
        const float amax = amax_of(x, 1);
        const float d = amax / 127.0f;
        const float id = q8_0_inverse_scale(d);
        b[i].d = fp32_to_fp16(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; ++k) q[k] = round_away(product(_mm256_loadu_ps(x + 8 * k), vid));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), pack_i8(q));
    }
}

void quant_q8_k_avx2(const float* src, void* dst, int64_t n) {
    block_q8_k* b = static_cast<block_q8_k*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float* x = src + i * QK_K;
        const float amax = amax_of(x, QK_K / 32);
        const float d = amax / 127.0f;
        const float id = q8_k_inverse_scale(amax);
        b[i].d = d;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i h[2];
        __m128i sums[4];  // bsums 4c..4c+3
        for (int c = 0; c < QK_K / 32; ++c) {  // 32 elements: bsum groups 2c and 2c+1
            __m256i q[4];
            for (int k = 0; k < 4; ++k) q[k] = nearest_clamped(product(_mm256_loadu_ps(x + 32 * c + 8 * k), vid));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 32 * c), pack_i8(q));
            // Two hadd rounds leave each group's sum split over the two lanes; the lane add finishes it.
            h[c & 1] = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            if (c & 1) {
                const __m256i hh = _mm256_hadd_epi32(h[0], h[1]);
                sums[c / 2] = _mm_add_epi32(_mm256_castsi256_si128(hh), _mm256_extracti128_si256(hh, 1));
            }
        }
        // |bsum| <= 16*127, so packs does not saturate.
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums), _mm_packs_epi32(sums[0], sums[1]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums + 8), _mm_packs_epi32(sums[2], sums[3]));
    }
}

}  // namespace

quant_fn quant_kernel_avx2(ggml_type type) {
    switch (type) {
        case ggml_type::Q8_0: return quant_q8_0_avx2;
        case ggml_type::Q8_K: return quant_q8_k_avx2;
        default: return nullptr;
    }
}

}  // namespace quant
}  // namespace specgen
