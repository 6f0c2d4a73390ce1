// AVX-512 versions of the vec_math.h row kernels: the scalar reference's operations, in the same
// order, on 16 lanes; tails through masked loads and stores so that every element goes through the
// vector code whatever the row length (same bits as the scalar kernels, tests/test_vec_math.py).
// Compiled with -mavx512f ... -ffp-contract=off (CMakeLists.txt): the multiplies and adds below
// must not be fused. Only called when the CPU allows.
#include <immintrin.h>

#include <cmath>

// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined_* helpers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/vec_math.h"

namespace specgen {
namespace vec {
namespace avx512 {
namespace {

inline __m512 set1(float v) { return _mm512_set1_ps(v); }

inline __m512 exp16(__m512 x) {
    const __m512 lo = set1(kExpLo), magic = set1(kRoundMagic);
    const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(lo, x);  // lo > x ? lo : x
    x = _mm512_min_ps(set1(kExpHi), x);
    const __m512 t = _mm512_add_ps(_mm512_mul_ps(x, set1(kLog2e)), magic);
    const __m512 n = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, set1(kLn2Hi)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, set1(kLn2Lo)));
    __m512 p = set1(kExpP0);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(kExpP1));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(kExpP2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(kExpP3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(kExpP4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), set1(kExpP5));
    const __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r), set1(1.0f));
    const __m512 scale = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(127)), 23));
    return _mm512_maskz_mul_ps(_knot_mask16(below), y, scale);
}

inline __m512 tanh16(__m512 x) {
    const __m512i sign = _mm512_set1_epi32(int(0x80000000u));
    const __m512 one = set1(1.0f);
    const __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
    const __m512 s = _mm512_mul_ps(x, x);
    __m512 p = set1(kTanhP0);
    p = _mm512_add_ps(_mm512_mul_ps(p, s), set1(kTanhP1));
    p = _mm512_add_ps(_mm512_mul_ps(p, s), set1(kTanhP2));
    p = _mm512_add_ps(_mm512_mul_ps(p, s), set1(kTanhP3));
    p = _mm512_add_ps(_mm512_mul_ps(p, s), set1(kTanhP4));
    const __m512 small = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, s), x), x);
    const __m512 e = exp16(_mm512_mul_ps(set1(2.0f), ax));
    const __m512 big = _mm512_sub_ps(one, _mm512_div_ps(set1(2.0f), _mm512_add_ps(e, one)));
    const __m512 big_signed = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(big), _mm512_and_si512(_mm512_castps_si512(x), sign)));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, set1(kTanhSmall), _CMP_LT_OQ), big_signed, small);
}

// mul_sigmoid: (g * (v < 0 ? e : 1)) / (1 + e), e = e^-|v|.
inline __m512 mul_sigmoid16(__m512 g, __m512 v) {
    const __m512 one = set1(1.0f);
    const __m512 e = exp16(_mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int(0x80000000u)))));
    const __m512 sel = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), one, e);
    return _mm512_div_ps(_mm512_mul_ps(g, sel), _mm512_add_ps(one, e));
}

inline __m512 gelu16(__m512 g) {
    const __m512 v = _mm512_mul_ps(g, _mm512_add_ps(set1(kGeluA), _mm512_mul_ps(set1(kGeluB), _mm512_mul_ps(g, g))));
    return mul_sigmoid16(g, v);
}

inline __m512 silu16(__m512 g) { return mul_sigmoid16(g, g); }

inline __mmask16 tail_mask(int64_t rem) { return __mmask16((1u << rem) - 1u); }

template <class F>
inline void map1(const float* x, int64_t n, float* y, F f) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

template <class F>
inline void map_mul(const float* g, const float* u, int64_t n, float* out, F f) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_mul_ps(f(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(out + i, m,
                              _mm512_mul_ps(f(_mm512_maskz_loadu_ps(m, g + i)), _mm512_maskz_loadu_ps(m, u + i)));
    }
}

}  // namespace

void exp_row(const float* x, int64_t n, float* y) { map1(x, n, y, exp16); }
void tanh_row(const float* x, int64_t n, float* y) { map1(x, n, y, tanh16); }
void gelu_mul(const float* gate, const float* up, int64_t n, float* out) { map_mul(gate, up, n, out, gelu16); }
void silu_mul(const float* gate, const float* up, int64_t n, float* out) { map_mul(gate, up, n, out, silu16); }

float exp_sub_sum(float* x, int64_t n, float sub) {
    // The scalar kernel's 8 partial sums live in one ymm: each 16-lane step adds its low 8 lanes,
    // then its high 8 lanes (the order of the scalar kernel's groups of 8).
    const __m512 vs = set1(sub);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs));
        _mm512_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(e, 1));
    }
    alignas(64) float lanes[16];
    int64_t rest = n - i, k = 0;  // 0..15 elements left
    if (rest > 0) {
        const __mmask16 m = tail_mask(rest);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
        _mm512_mask_storeu_ps(x + i, m, e);
        _mm512_store_ps(lanes, e);
        if (rest >= 8) {
            acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
            k = 8;
        }
    }
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float s = _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
    for (; k < rest; ++k) s += lanes[k];
    return s;
}

// dot_rows: 8 partial sums per key fit a ymm, so the AVX2 kernel is this ISA's as well.
void dot_rows(const float* q, const float* K, int64_t stride, int n_keys, int64_t n, float* out) {
    avx2::dot_rows(q, K, stride, n_keys, n, out);
}

// weighted_sum_rows_add: NV vectors of outputs stay in registers while the rows stream past.
template <int NV>
inline void weighted_block(const float* w, const float* V, int64_t stride, int n_rows, float* o, __mmask16 last) {
    __m512 acc[NV];
    for (int c = 0; c + 1 < NV; ++c) acc[c] = _mm512_loadu_ps(o + 16 * c);
    acc[NV - 1] = _mm512_maskz_loadu_ps(last, o + 16 * (NV - 1));
    for (int j = 0; j < n_rows; ++j) {
        const __m512 wj = set1(w[j]);
        const float* v = V + j * stride;
        for (int c = 0; c + 1 < NV; ++c) acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(wj, _mm512_loadu_ps(v + 16 * c)));
        acc[NV - 1] = _mm512_add_ps(acc[NV - 1], _mm512_mul_ps(wj, _mm512_maskz_loadu_ps(last, v + 16 * (NV - 1))));
    }
    for (int c = 0; c + 1 < NV; ++c) _mm512_storeu_ps(o + 16 * c, acc[c]);
    _mm512_mask_storeu_ps(o + 16 * (NV - 1), last, acc[NV - 1]);
}

void weighted_sum_rows_add(const float* w, const float* V, int64_t stride, int n_rows, int64_t n, float* o) {
    int64_t c = 0;
    for (; c + 128 <= n; c += 128) weighted_block<8>(w, V + c, stride, n_rows, o + c, __mmask16(0xffff));
    for (; c < n; c += 16)
        weighted_block<1>(w, V + c, stride, n_rows, o + c, n - c >= 16 ? __mmask16(0xffff) : tail_mask(n - c));
}

// argmax_finite: the maximum and any NaN / +inf in one pass, then the first index holding it.
int64_t argmax_finite(const float* x, int64_t n) {
    const __m512 inf = set1(INFINITY);
    __m512 mx = set1(-INFINITY);
    __mmask16 bad = 0;
    int64_t i = 0;
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
        const __m512 v = _mm512_mask_loadu_ps(set1(-INFINITY), m, x + i);
        bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v, inf, _CMP_EQ_OQ);
        mx = _mm512_max_ps(mx, v);
    }
    if (bad) return -1;
    const __m512 best = set1(_mm512_reduce_max_ps(mx));
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
        const __mmask16 hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), best, _CMP_EQ_OQ);
        if (hit) return i + __builtin_ctz(hit);
    }
    return 0;  // unreachable: the maximum is one of the elements
}

// top_k: after the first k elements almost every value fails the test against the k-th kept one;
// sixteen at a time are compared with it and only the rare lanes above it go to top_k_push, in index
// order (the threshold only rises, so a lane it lets through is re-tested there).
void top_k(const float* x, int64_t n, int k, float* val, int32_t* idx) {
    int filled = 0;
    int64_t i = 0;
    for (; i < n && i < k; ++i) top_k_push(x[i], int32_t(i), k, filled, val, idx);
    for (; i + 16 <= n; i += 16) {
        __mmask16 above = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), set1(val[k - 1]), _CMP_GT_OQ);
        for (; above; above &= __mmask16(above - 1)) {
            const int64_t j = i + __builtin_ctz(above);
            top_k_push(x[j], int32_t(j), k, filled, val, idx);
        }
    }
    for (; i < n; ++i) top_k_push(x[i], int32_t(i), k, filled, val, idx);
}

}  // namespace avx512
}  // namespace vec
}  // namespace specgen
