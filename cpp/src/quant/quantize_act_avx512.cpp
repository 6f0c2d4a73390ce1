// AVX-512 activation quantizers (float rows -> Q8_0 / Q8_K), the step before every quantized matmul.
// Every output byte equals the scalar reference's (q8_0.cpp, q8_k.cpp) for every finite input: the
// same amax (max is exact in any order), d and id from the same scalar float ops, and the reference's
// rounding rebuilt from exact float steps. Checked byte for byte by tests/test_quant.py.
// Compiled with -mavx512{f,bw,vl,dq,vnni} -mavx2 -mfma -mf16c -mbmi2 (CMakeLists.txt); only called
// when the CPU allows.
#include <immintrin.h>

// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"


#include "quant/kernels.h"
#include "quant/quant.h"

namespace specgen {
namespace quant {
namespace {

// x*id rounded to float, as the reference computes it: the empty asm makes sure GCC
// (-ffp-contract=fast, -mfma) can never fuse the product into the add that follows.
inline __m512 product(__m512 a, __m512 b) {
    __m512 p = _mm512_mul_ps(a, b);
    __asm__("" : "+v"(p));
    return p;
}

// max |x[j]| for j < 64*n4 (n4 groups of 64 floats).
inline float amax_of(const float* x, int n4) {
    __m512 m[4];
    for (int k = 0; k < 4; ++k) m[k] = _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k));
    for (int j = 1; j < n4; ++j)
        for (int k = 0; k < 4; ++k) m[k] = _mm512_max_ps(m[k], _mm512_abs_ps(_mm512_loadu_ps(x + 64 * j + 16 * k)));
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
}

// std::round (half away from zero): t = trunc(v) and f = v - t are exact, so |f| >= 0.5 decides
// exactly; adding 0.5 before truncating would round 0.49999997 up.
inline __m512i round_away(__m512 v) {
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));  // sign(v)
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

// nearest_int (kquant_search.h): float add of +-0.5 (chosen by v >= 0), then truncate, then the
// reference's clamp to [-127, 127] in int (cvttps's 0x80000000 for overflow clamps as it does there).
inline __m512i nearest_clamped(__m512 v) {
    const __mmask16 pos = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ);
    const __m512 half = _mm512_mask_blend_ps(pos, _mm512_set1_ps(-0.5f), _mm512_set1_ps(0.5f));
    const __m512i q = _mm512_cvttps_epi32(_mm512_add_ps(v, half));
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
}

inline void store16_i8(int8_t* dst, __m512i q) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q));
}

// 16 int32 -> 8 int32 with the same total.
inline __m256i fold(__m512i q) {
    return _mm256_add_epi32(_mm512_castsi512_si256(q), _mm512_extracti64x4_epi64(q, 1));
}

void quant_q8_0_avx512(const float* src, void* dst, int64_t n) {
    block_q8_0* b = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / QK; ++i) {
        const float* x = src + i * QK;
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        const float d = amax / 127.0f;
        const float id = q8_0_inverse_scale(d);
        b[i].d = fp32_to_fp16(d);
        const __m512 vid = _mm512_set1_ps(id);
        store16_i8(b[i].qs, round_away(product(x0, vid)));
        store16_i8(b[i].qs + 16, round_away(product(x1, vid)));
    }
}

void quant_q8_k_avx512(const float* src, void* dst, int64_t n) {
    block_q8_k* b = static_cast<block_q8_k*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const float* x = src + i * QK_K;
        const float amax = amax_of(x, QK_K / 64);
        const float d = amax / 127.0f;
        const float id = q8_k_inverse_scale(amax);
        b[i].d = d;
        const __m512 vid = _mm512_set1_ps(id);
        __m128i sums[4];  // bsums 4c..4c+3
        for (int c = 0; c < QK_K / 64; ++c) {  // 64 elements: bsum groups 4c..4c+3, one zmm each
            __m256i g[4];
            for (int k = 0; k < 4; ++k) {
                const __m512i q = nearest_clamped(product(_mm512_loadu_ps(x + 64 * c + 16 * k), vid));
                store16_i8(b[i].qs + 64 * c + 16 * k, q);
                g[k] = fold(q);
            }
            // Two hadd rounds leave each group's sum split over the two lanes; the lane add finishes it.
            const __m256i hh = _mm256_hadd_epi32(_mm256_hadd_epi32(g[0], g[1]), _mm256_hadd_epi32(g[2], g[3]));
            sums[c] = _mm_add_epi32(_mm256_castsi256_si128(hh), _mm256_extracti128_si256(hh, 1));
        }
        // |bsum| <= 16*127, so packs does not saturate.
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums), _mm_packs_epi32(sums[0], sums[1]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums + 8), _mm_packs_epi32(sums[2], sums[3]));
    }
}

}  // namespace

quant_fn quant_kernel_avx512(ggml_type type) {
    switch (type) {
        case ggml_type::Q8_0: return quant_q8_0_avx512;
        case ggml_type::Q8_K: return quant_q8_k_avx512;
        default: return nullptr;
    }
}

}  // namespace quant
}  // namespace specgen
