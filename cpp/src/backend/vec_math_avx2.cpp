// AVX2 versions of the vec_math.h row kernels: the scalar reference's operations, in the same
// order, on 8 lanes; tails through masked loads and stores so that every element goes through the
// vector code whatever the row length (same bits as the scalar kernels, tests/test_vec_math.py).
// Compiled with -mavx2 -mfma ... -ffp-contract=off (CMakeLists.txt): the multiplies and adds below
// must not be fused. Only called when the CPU allows.
#include <immintrin.h>

#include "backend/vec_math.h"

namespace specgen {
namespace vec {
namespace avx2 {
namespace {

inline __m256 set1(float v) { return _mm256_set1_ps(v); }

// exp_approx on 8 lanes.
inline __m256 exp8(__m256 x) {
    const __m256 lo = set1(kExpLo), magic = set1(kRoundMagic);
    const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, x);  // lo > x ? lo : x
    x = _mm256_min_ps(set1(kExpHi), x);
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(x, set1(kLog2e)), magic);
    const __m256 n = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, set1(kLn2Hi)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, set1(kLn2Lo)));
    __m256 p = set1(kExpP0);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), set1(kExpP5));
    const __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), set1(1.0f));
    const __m256 scale = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127)), 23));
    return _mm256_andnot_ps(below, _mm256_mul_ps(y, scale));
}

inline __m256 tanh8(__m256 x) {
    const __m256 sign = set1(-0.0f), one = set1(1.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 s = _mm256_mul_ps(x, x);
    __m256 p = set1(kTanhP0);
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, s), set1(kTanhP4));
    const __m256 small = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, s), x), x);
    const __m256 e = exp8(_mm256_mul_ps(set1(2.0f), ax));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(set1(2.0f), _mm256_add_ps(e, one)));
    const __m256 big_signed = _mm256_or_ps(big, _mm256_and_ps(x, sign));
    return _mm256_blendv_ps(big_signed, small, _mm256_cmp_ps(ax, set1(kTanhSmall), _CMP_LT_OQ));
}

// mul_sigmoid: (g * (v < 0 ? e : 1)) / (1 + e), e = e^-|v|.
inline __m256 mul_sigmoid8(__m256 g, __m256 v) {
    const __m256 one = set1(1.0f);
    const __m256 e = exp8(_mm256_or_ps(v, set1(-0.0f)));
    const __m256 sel = _mm256_blendv_ps(one, e, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_div_ps(_mm256_mul_ps(g, sel), _mm256_add_ps(one, e));
}

inline __m256 gelu8(__m256 g) {
    const __m256 v = _mm256_mul_ps(g, _mm256_add_ps(set1(kGeluA), _mm256_mul_ps(set1(kGeluB), _mm256_mul_ps(g, g))));
    return mul_sigmoid8(g, v);
}

inline __m256 silu8(__m256 g) { return mul_sigmoid8(g, g); }

// Lane mask for the first `rem` (< 8) lanes.
inline __m256i tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <class F>
inline void map1(const float* x, int64_t n, float* y, F f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));
    }
}

template <class F>
inline void map_mul(const float* g, const float* u, int64_t n, float* out, F f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(f(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(f(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m)));
    }
}

}  // namespace

void exp_row(const float* x, int64_t n, float* y) { map1(x, n, y, exp8); }
void tanh_row(const float* x, int64_t n, float* y) { map1(x, n, y, tanh8); }
void gelu_mul(const float* gate, const float* up, int64_t n, float* out) { map_mul(gate, up, n, out, gelu8); }
void silu_mul(const float* gate, const float* up, int64_t n, float* out) { map_mul(gate, up, n, out, silu8); }

float exp_sub_sum(float* x, int64_t n, float sub) {
    const __m256 vs = set1(sub);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    // ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)), as the scalar kernel.
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float s = _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vs));
        _mm256_maskstore_ps(x + i, m, e);
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, e);
        for (int64_t k = 0; k < n - i; ++k) s += lanes[k];
    }
    return s;
}

}  // namespace avx2
}  // namespace vec
}  // namespace specgen
